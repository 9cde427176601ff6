# frozen_string_literal: true

require_relative "concurrency_metrics/version"
require_relative "concurrency_metrics/names"
require_relative "concurrency_metrics/config"
require_relative "concurrency_metrics/timing"
require_relative "concurrency_metrics/middleware"
require_relative "concurrency_metrics/adapters"
require_relative "concurrency_metrics/instrumentation"
require_relative "concurrency_metrics/pool_wait"
require_relative "concurrency_metrics/event_loop_probe"

# Per-request running / I/O-wait / GVL-wait seconds for concurrency-operator, published through
# yabeda, prometheus_exporter or the plain Prometheus client. See README.md.
module ConcurrencyMetrics
  # Fiber-local (Thread#[]): the request being measured on this thread.
  TIMING_KEY = :concurrency_metrics_timing

  # What a configured process uses: fixed once started, read without locks by requests.
  class State
    attr_reader :config, :gvl_mode, :adapters, :runqueue, :totals

    def initialize(config, gvl_mode, adapters, totals = [])
      @config = config
      @gvl_mode = gvl_mode
      @adapters = adapters.freeze
      @totals = totals.freeze
      wanted = config.runqueue == :auto ? gvl_mode == :estimate : config.runqueue
      @runqueue = wanted && RunQueue.available?
      freeze
    end

    def info
      { gvl_source: @gvl_mode.to_s, runqueue_source: @runqueue ? "schedstat" : "none",
        sample_rate: format("%g", @config.sample_rate), ruby_version: RUBY_VERSION }
    end

    # Never raises: a metrics failure must not fail the request.
    def record(sample)
      @adapters.each do |adapter|
        adapter.record(sample)
      rescue StandardError => e
        @config.on_error&.call(e)
      end
    end

    # An unsampled total (Names::TOTALS), for adapters that keep them (#add).
    def add(field, seconds)
      return unless @totals.include?(field)

      @adapters.each do |adapter|
        adapter.add(field, seconds) if adapter.respond_to?(:add)
      rescue StandardError => e
        @config.on_error&.call(e)
      end
    end
  end

  class << self
    attr_reader :state

    # ConcurrencyMetrics.configure { |c| c.backend = :yabeda; c.sample_rate = 0.01 }
    def configure
      config = Config.new
      yield config if block_given?
      start(config)
    end

    def start(config)
      raise ConfigError, "backend is not set (:yabeda, :prometheus_exporter or :prometheus_client)" if config.backends.empty?

      mode = Gvl.resolve(config.gvl)
      Gvl.enable_hook if mode == :hook
      Instrumentation.install(config.instrument) if mode == :estimate
      adapters = config.backends.map { |b| Adapters.build(b, config) }
      totals = []
      totals << :db_pool_wait if pool_wait?(config)
      totals.push(:event_loop_lag, :event_loop_probe) if event_loop?(config)
      @state = State.new(config, mode, adapters, totals)
      adapters.each do |a|
        a.setup(@state.info)
        a.setup_totals(totals) if totals.any? && a.respond_to?(:setup_totals)
      end
      @state
    end

    # Seconds a thread waited for a database connection (PoolWait).
    def pool_waited(seconds)
      @state&.add(:db_pool_wait, seconds)
    end

    # "hook" or "estimate" once configured, else nil.
    def gvl_source
      @state&.gvl_mode&.to_s
    end

    # The measurement of the request running on this thread, or nil.
    def current_timing
      Thread.current[TIMING_KEY]
    end

    # Wrap a wait the gem cannot see by itself (a Redis call, a queue pop, an SDK's socket):
    # in estimate mode it counts as I/O wait instead of landing in the GVL estimate. With the
    # hook, or outside a measured request, it only runs the block.
    def io_wait(nominal = nil, &block)
      timing = current_timing
      timing ? timing.io_wait(nominal, &block) : yield
    end

    # For forking servers: call in each new worker (the Puma plugin does).
    def after_fork
      @state&.adapters&.each { |a| a.after_fork if a.respond_to?(:after_fork) }
    end

    private

    # :auto: under Falcon (its gem is loaded before the app).
    def event_loop?(config)
      config.event_loop == :auto ? !defined?(::Falcon).nil? : config.event_loop
    end

    # :auto: when ActiveRecord is loaded (Rails loads it before the initializers run).
    def pool_wait?(config)
      wanted = config.db_pool_wait == :auto ? defined?(::ActiveRecord::Base) : config.db_pool_wait
      return false unless wanted
      return true if PoolWait.install

      config.on_error&.call(ConfigError.new("db_pool_wait: this ActiveRecord has no ConnectionPool::Queue#wait_poll to time"))
      false
    end

    public

    # Forget the configuration (tests).
    def reset!
      @state = nil
    end
  end
end

require_relative "concurrency_metrics/railtie" if defined?(Rails::Railtie)
