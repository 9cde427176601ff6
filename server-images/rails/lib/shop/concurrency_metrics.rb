# frozen_string_literal: true

module Shop
  # The concurrency-metrics gem (this repository's concurrency-metrics/), loaded without
  # Bundler from Shop::Settings.concurrency_metrics_lib, publishing into the app's own store
  # through the gem's adapter interface (#setup, #record) — the series its yabeda adapter
  # registers (group `ruby`): ruby_running_seconds_total, ruby_io_wait_seconds_total,
  # ruby_gvl_wait_seconds_total, …, ruby_gvl_metrics_info — and, as ActiveRecord is loaded, the
  # gem's ruby_db_pool_wait_seconds_total.
  module ConcurrencyMetrics
    module_function

    # Before the application class is defined: the gem's Railtie (its middleware, first in
    # the stack) must exist when Rails collects the initializers.
    def require_gem!(env = ENV)
      $LOAD_PATH.unshift(Settings.concurrency_metrics_lib(env))
      require "concurrency_metrics"
    end

    def start!(store, env = ENV)
      ::ConcurrencyMetrics.configure do |c|
        c.backend = StoreAdapter.new(store)
        c.sample_rate = Settings.concurrency_metrics_sample_rate(env)
      end
    end

    class StoreAdapter
      def initialize(store)
        @store = store
        @names = ::ConcurrencyMetrics::Names::COUNTERS.transform_values { |(suffix, _)| ::ConcurrencyMetrics::Names.full(suffix).to_sym }
      end

      def setup(info)
        return if @store.registered?(@names[:running])

        ::ConcurrencyMetrics::Names::COUNTERS.each do |field, (_, help)|
          @store.counter(@names[field], help, zero: true)
        end
        info_name = ::ConcurrencyMetrics::Names.full(::ConcurrencyMetrics::Names::INFO[0]).to_sym
        @store.gauge(info_name, ::ConcurrencyMetrics::Names::INFO[1])
        @store.collect { @store.set(info_name, info, 1) }
      end

      def record(sample)
        @names.each do |field, name|
          @store.increment(name, {}, field == :requests ? 1 : sample[field])
        end
      end

      # The gem's unsampled totals (ruby_db_pool_wait_seconds_total with ActiveRecord).
      def setup_totals(fields)
        @totals = fields.to_h do |f|
          suffix, help = ::ConcurrencyMetrics::Names::TOTALS.fetch(f)
          name = ::ConcurrencyMetrics::Names.full(suffix).to_sym
          @store.counter(name, help, zero: true) unless @store.registered?(name)
          [f, name]
        end
      end

      def add(field, seconds)
        name = @totals&.[](field)
        @store.increment(name, {}, seconds) if name
      end
    end
  end
end
