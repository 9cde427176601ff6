# frozen_string_literal: true

module ConcurrencyMetrics
  module Adapters
    # The plain Prometheus client: full names in its registry. Two APIs exist and both are
    # handled, told apart by the registry's #counter parameters:
    #   prometheus-client (client_ruby >= 2): registry.counter(name, docstring:, labels:),
    #     counter.increment(by:, labels:), registry.gauge(..., store_settings:), gauge.set(v, labels:);
    #   prometheus-client-mmap (GitLab's, Debian's ruby-prometheus-client-mmap):
    #     registry.counter(name, docstring, base_labels), counter.increment(labels, by),
    #     registry.gauge(name, docstring, base_labels, multiprocess_mode), gauge.set(labels, v).
    # Several worker processes: the mmap client writes per-process files in
    # prometheus_multiproc_dir and its exporter sums them; client_ruby needs DirectFileStore.
    class PrometheusClient
      def initialize(registry)
        @registry = registry
      end

      def setup(info)
        @keyword = keyword_api?
        @counters = Names::COUNTERS.to_h do |field, (suffix, help)|
          [field, fetch_or_register(:counter, Names.full(suffix).to_sym, help)]
        end
        # The series exist (at 0) before the first sampled request: the operator checks that a
        # check's series exist before it moves traffic.
        @counters.each_value { |c| @keyword ? c.increment(by: 0) : c.increment({}, 0) }
        info_name, info_help = Names::INFO
        gauge = fetch_or_register(:gauge, Names.full(info_name).to_sym, info_help)
        @keyword ? gauge.set(1, labels: info) : gauge.set(info, 1)
      end

      def setup_totals(fields)
        @totals = fields.to_h do |f|
          suffix, help = Names::TOTALS.fetch(f)
          counter = fetch_or_register(:counter, Names.full(suffix).to_sym, help)
          @keyword ? counter.increment(by: 0) : counter.increment({}, 0)
          [f, counter]
        end
      end

      def add(field, seconds)
        counter = @totals&.[](field)
        return unless counter

        @keyword ? counter.increment(by: seconds) : counter.increment({}, seconds)
      end

      def record(sample)
        @counters.each do |field, counter|
          by = field == :requests ? 1 : sample[field]
          @keyword ? counter.increment(by: by) : counter.increment({}, by)
        end
      end

      private

      # client_ruby's registry takes docstring: as a keyword, the mmap client's positionally.
      def keyword_api?
        @registry.method(:counter).parameters.any? { |(kind, name)| name == :docstring && %i[key keyreq].include?(kind) }
      end

      def fetch_or_register(type, name, help)
        existing = @registry.get(name)
        return existing if existing

        if type == :counter
          @keyword ? @registry.counter(name, docstring: help) : @registry.counter(name, help)
        elsif @keyword
          @registry.gauge(name, docstring: help, labels: Names::INFO_LABELS, **gauge_store_settings)
        else
          # One series per process would be summed; the same value everywhere, so the max.
          @registry.gauge(name, help, {}, :max)
        end
      end

      # DirectFileStore sums gauges across processes unless told otherwise; other stores
      # refuse settings.
      def gauge_store_settings
        return {} unless defined?(::Prometheus::Client::DataStores::DirectFileStore)

        store = ::Prometheus::Client.respond_to?(:config) && ::Prometheus::Client.config.data_store
        store.is_a?(::Prometheus::Client::DataStores::DirectFileStore) ? { store_settings: { aggregation: :max } } : {}
      end
    end
  end
end
