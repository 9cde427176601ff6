# frozen_string_literal: true

module ConcurrencyMetrics
  # The series this gem writes. Every name is PREFIX + suffix: yabeda registers the suffixes in
  # its group `ruby` (yabeda-prometheus names a metric group_name), prometheus_exporter's
  # collector prepends its default prefix `ruby_`, the plain client gets the full names. The
  # first three are what concurrency-operator's presets read (src/api/metric_names.rs).
  module Names
    PREFIX = "ruby_"
    GROUP = :ruby

    COUNTERS = {
      running: ["running_seconds_total",
                "Thread CPU time of sampled requests (running Ruby code, holding the GVL)."],
      io_wait: ["io_wait_seconds_total",
                "Time sampled requests spent off the GVL waiting (I/O, sleep, locks)."],
      gvl_wait: ["gvl_wait_seconds_total",
                 "Time sampled requests were ready to run but waiting for the GVL."],
      runqueue_wait: ["cpu_runqueue_wait_seconds_total",
                      "Time sampled requests' threads were runnable but given no CPU by the kernel " \
                      "(schedstat; 0 unless runqueue_source=\"schedstat\")."],
      requests: ["sampled_requests_total",
                 "Requests measured (sampled); the denominator of the per-request figures above."],
      wall: ["sampled_request_duration_seconds_total",
             "Wall time of the sampled requests inside the middleware; gvlWait's denominator."]
    }.freeze

    # Counted for every request, not sampled: waits the gem times where they happen rather than
    # per request. Only registered when switched on (an app without ActiveRecord has no pool,
    # and a series at 0 would pass the operator's pre-flight lookup for nothing).
    TOTALS = {
      db_pool_wait: ["db_pool_wait_seconds_total",
                     "Time threads waited for an ActiveRecord connection (every connection in " \
                     "use), all requests (not sampled); the operator's dbPoolWait check."],
      event_loop_lag: ["event_loop_lag_seconds_total",
                       "Seconds the fiber scheduler ran the event-loop probe's timer late (a " \
                       "call that blocks without yielding stalls every fiber); eventLoopLag."],
      event_loop_probe: ["event_loop_probe_seconds_total",
                         "Seconds the event-loop probe's timers covered: eventLoopLag's denominator."]
    }.freeze

    INFO = ["gvl_metrics_info", "How this process measures the GVL counters (value 1)."].freeze
    INFO_LABELS = %i[gvl_source runqueue_source sample_rate ruby_version].freeze

    module_function

    def full(suffix)
      PREFIX + suffix
    end
  end

  # One sampled request's time split, in seconds.
  Sample = Struct.new(:running, :io_wait, :gvl_wait, :runqueue_wait, :wall, keyword_init: true)
end
