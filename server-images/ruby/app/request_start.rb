# frozen_string_literal: true

module Reference
  # Request queue time from the router's arrival stamp: how long the request waited before the
  # app picked it up — the wait for a free thread that the request duration cannot see.
  # Same rules as gvl-sim's queue_time.rs, which lists what each router writes: nginx
  # `t=${msec}`, HAProxy `t=%Ts%ms`, Envoy/Istio/Contour `t=%START_TIME(%s%3f)%`, Heroku a bare
  # integer of milliseconds, Apache `t=` + microseconds; `X-Queue-Start` is the older name;
  # AWS ALB only has the arrival second in `X-Amzn-Trace-Id` (read last, marked coarse).
  module RequestStart
    # Earliest plausible stamp (2001-09-09): smaller values are garbage, not old requests.
    EARLIEST = 1e9

    # [seconds since the epoch, coarse?] or nil. `t=` optional; seconds with a fraction
    # (`1700000000.123`) or an integer of s/ms/µs/ns, told apart by magnitude; a list is read
    # at its first (earliest) entry. Integer seconds are coarse (one-second resolution).
    def self.parse_stamp(value)
      return nil unless value.is_a?(String)

      v = value.split(",", 2).first.to_s.strip.delete_prefix("t=").strip
      return nil unless v.match?(/\A\d+(\.\d+)?\z/)

      n = v.to_f
      secs, coarse = if n < 1e11 then [n, !v.include?(".")]
                     elsif n < 1e14 then [n / 1e3, false]
                     elsif n < 1e17 then [n / 1e6, false]
                     else [n / 1e9, false]
                     end
      secs.finite? && secs >= EARLIEST ? [secs, coarse] : nil
    end

    def self.parse(value)
      parse_stamp(value)&.first
    end

    # ALB's `Root=1-<8 hex digits of epoch seconds>-…` (possibly after `Self=…;`).
    def self.parse_amzn_trace_id(value)
      return nil unless value.is_a?(String)

      root = value.split(";").map(&:strip).find { |part| part.start_with?("Root=") }
      m = root&.match(/\ARoot=1-(\h{8})-/)
      return nil unless m

      secs = m[1].to_i(16).to_f
      secs >= EARLIEST ? [secs, true] : nil
    end

    # [seconds, coarse?] from a Rack env: X-Request-Start, else X-Queue-Start, else ALB's trace id.
    def self.stamp_from_env(env)
      parse_stamp(env["HTTP_X_REQUEST_START"]) ||
        parse_stamp(env["HTTP_X_QUEUE_START"]) ||
        parse_amzn_trace_id(env["HTTP_X_AMZN_TRACE_ID"])
    end

    # now - header time, clamped at 0 (a proxy's clock may run ahead); nil without a usable header.
    def self.queue_time(value, now = Time.now.to_f)
      start = parse(value)
      start && [now - start, 0.0].max
    end

    # The same from a Rack env, with the fallbacks of stamp_from_env.
    def self.queue_time_from_env(env, now = Time.now.to_f)
      stamp = stamp_from_env(env)
      stamp && [now - stamp.first, 0.0].max
    end
  end
end
