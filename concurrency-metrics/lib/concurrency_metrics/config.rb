# frozen_string_literal: true

module ConcurrencyMetrics
  class ConfigError < ArgumentError; end

  # Settings, checked as they are set: a bad value raises ConfigError naming the setting.
  class Config
    BACKENDS = %i[yabeda prometheus_exporter prometheus_client].freeze
    INSTRUMENTS = %i[active_record net_http].freeze
    DEFAULT_IGNORE = ["/metrics", "/healthz", "/up"].freeze

    attr_reader :sample_rate, :backends, :gvl, :instrument, :ignore_paths, :runqueue, :db_pool_wait, :event_loop
    # PrometheusExporter::Client to send to (default: PrometheusExporter::Client.default).
    attr_accessor :prometheus_exporter_client
    # Prometheus::Client::Registry (default: Prometheus::Client.registry).
    attr_accessor :prometheus_registry
    # Called with an exception raised while recording; the request is never affected.
    attr_accessor :on_error
    # Anything with #rand (the sampling decision); Random by default.
    attr_accessor :random

    def initialize
      @sample_rate = 1.0
      @backends = []
      @gvl = :auto
      @runqueue = :auto
      @db_pool_wait = :auto
      @event_loop = :auto
      @instrument = INSTRUMENTS.dup
      @ignore_paths = DEFAULT_IGNORE.dup
      @random = Random
      @on_error = method(:warn_once)
    end

    # The share of requests measured, in (0, 1]. Per-request figures stay right at any rate
    # because they are divided by ruby_sampled_requests_total, not by all requests.
    def sample_rate=(value)
      rate = Float(value, exception: false)
      unless rate&.finite? && rate.positive? && rate <= 1.0
        raise ConfigError, "sample_rate must be a number in (0, 1], got #{value.inspect}"
      end

      @sample_rate = rate
    end

    # :yabeda, :prometheus_exporter, :prometheus_client, or an object with #setup(info) and
    # #record(sample) (see Adapters); one or an Array.
    def backend=(value)
      list = Array(value)
      raise ConfigError, "backend must name at least one backend" if list.empty?

      list.each do |b|
        next if BACKENDS.include?(b) || (b.respond_to?(:record) && b.respond_to?(:setup))

        raise ConfigError, "backend must be one of #{BACKENDS.join(', ')} or an adapter object " \
                           "(#setup, #record), got #{b.inspect}"
      end
      @backends = list
    end
    alias backends= backend=

    def gvl=(value)
      unless %i[auto hook estimate].include?(value)
        raise ConfigError, "gvl must be :auto, :hook or :estimate, got #{value.inspect}"
      end

      @gvl = value
    end

    # Read the kernel's run-queue wait (/proc/thread-self/schedstat, a syscall per read):
    # :auto reads it in estimate mode, which subtracts it from the GVL estimate, and not with
    # the hook, which measures GVL wait directly.
    def runqueue=(value)
      raise ConfigError, "runqueue must be :auto, true or false, got #{value.inspect}" unless [:auto, true, false].include?(value)

      @runqueue = value
    end

    # Time ActiveRecord's connection checkout waits (ruby_db_pool_wait_seconds_total): :auto
    # when ActiveRecord is loaded.
    def db_pool_wait=(value)
      raise ConfigError, "db_pool_wait must be :auto, true or false, got #{value.inspect}" unless [:auto, true, false].include?(value)

      @db_pool_wait = value
    end

    # Probe how late the fiber scheduler runs a timer (ruby_event_loop_lag_seconds_total and
    # ruby_event_loop_probe_seconds_total): :auto under Falcon.
    def event_loop=(value)
      raise ConfigError, "event_loop must be :auto, true or false, got #{value.inspect}" unless [:auto, true, false].include?(value)

      @event_loop = value
    end

    # Libraries whose calls count as I/O wait in estimate mode (the hook sees every wait).
    def instrument=(value)
      list = Array(value)
      bad = list - INSTRUMENTS
      raise ConfigError, "instrument: unknown #{bad.map(&:inspect).join(', ')} (known: #{INSTRUMENTS.join(', ')})" if bad.any?

      @instrument = list
    end

    # Paths not measured (exact strings or Regexps), e.g. the scrape and health endpoints.
    def ignore_paths=(value)
      list = Array(value)
      bad = list.reject { |p| p.is_a?(String) || p.is_a?(Regexp) }
      raise ConfigError, "ignore_paths must be Strings or Regexps, got #{bad.inspect}" if bad.any?

      @ignore_paths = list
    end

    def ignored?(path)
      @ignore_paths.any? { |p| p.is_a?(Regexp) ? p.match?(path.to_s) : p == path }
    end

    def sample?
      @sample_rate >= 1.0 || @random.rand < @sample_rate
    end

    private

    def warn_once(error)
      return if @warned

      @warned = true
      warn "concurrency_metrics: recording failed (#{error.class}: #{error.message}); further errors are not printed"
    end
  end
end
