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
    #
    # Nothing is sent from setup: in Puma cluster mode with preload_app! setup runs in the
    # master, and a client socket opened there would be inherited by every worker (one TCP
    # stream written by several processes). Each process announces itself — every counter at 0,
    # so the series exist before its first request is measured, and the info gauge — from
    # after_fork (the Puma plugin calls it as a worker boots) or its first sampled request.
    class PrometheusExporter
      def initialize(client)
        @client = client
        @announced_pid = nil
      end

      def setup(info)
        @info_labels = info
        @counters ||= Names::COUNTERS.transform_values { |(suffix, help)| @client.register(:counter, suffix, help) }
        @info ||= @client.register(:gauge, Names::INFO[0], Names::INFO[1])
      end

      def setup_totals(fields)
        @totals ||= fields.to_h { |f| [f, @client.register(:counter, *Names::TOTALS.fetch(f))] }
      end

      def add(field, seconds)
        metric = @totals&.[](field)
        return unless metric

        announce unless @announced_pid == Process.pid
        metric.observe(seconds, {})
      end

      def record(sample)
        announce unless @announced_pid == Process.pid
        @counters.each do |field, metric|
          metric.observe(field == :requests ? 1 : sample[field], {})
        end
      end

      def after_fork
        announce
      end

      private

      def announce
        @announced_pid = Process.pid
        @counters.each_value { |m| m.observe(0, {}) }
        @totals&.each_value { |m| m.observe(0, {}) }
        @info.observe(1, @info_labels)
      end
    end
  end
end
