# frozen_string_literal: true

module ConcurrencyMetrics
  module Adapters
    # prometheus_exporter: custom metrics sent through PrometheusExporter::Client to the
    # collector process (`prometheus_exporter`, a sidecar), which adds its prefix — `ruby_` by
    # default, giving `ruby_running_seconds_total` etc. (run it with the default --prefix, or
    # set the names in the experiment). The collector sums every worker's increments, so Puma
    # cluster mode needs nothing more. API used (discourse/prometheus_exporter, client.rb):
    # Client#register(type, name, help) -> RemoteMetric#observe(value, keys); the collector's
    # default handling of a "counter" adds value, of a "gauge" sets it.
    class PrometheusExporter
      def initialize(client)
        @client = client
      end

      def setup(info)
        @counters ||= Names::COUNTERS.transform_values { |(suffix, help)| @client.register(:counter, suffix, help) }
        @info_labels = info
        @info ||= @client.register(:gauge, Names::INFO[0], Names::INFO[1])
        @info.observe(1, @info_labels)
      end

      def record(sample)
        @counters.each do |field, metric|
          metric.observe(field == :requests ? 1 : sample[field], {})
        end
      end

      # The info gauge again from the worker (the client's sender thread restarts by itself).
      def after_fork
        @info&.observe(1, @info_labels)
      end
    end
  end
end
