# frozen_string_literal: true

module Reference
  # Request queue time from the load balancer's X-Request-Start header (Heroku router, nginx
  # `proxy_set_header X-Request-Start "t=${msec}"`): how long the request waited before the
  # app picked it up — the wait for a free thread that the request duration cannot see.
  # Same rules as gvl-sim's queue_time.rs.
  module RequestStart
    # Earliest plausible stamp (2001-09-09): smaller values are garbage, not old requests.
    EARLIEST = 1e9

    # Seconds since the epoch, or nil. `t=` optional; seconds with a fraction
    # (`1700000000.123`) or an integer of s/ms/µs/ns, told apart by magnitude.
    def self.parse(value)
      return nil unless value.is_a?(String)

      v = value.strip.delete_prefix("t=").strip
      return nil unless v.match?(/\A\d+(\.\d+)?\z/)

      n = v.to_f
      secs = if n < 1e11 then n
             elsif n < 1e14 then n / 1e3
             elsif n < 1e17 then n / 1e6
             else n / 1e9
             end
      secs.finite? && secs >= EARLIEST ? secs : nil
    end

    # now - header time, clamped at 0 (a proxy's clock may run ahead); nil without a usable header.
    def self.queue_time(value, now = Time.now.to_f)
      start = parse(value)
      start && [now - start, 0.0].max
    end
  end
end
