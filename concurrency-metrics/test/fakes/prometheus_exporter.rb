# frozen_string_literal: true

# A stand-in for prometheus_exporter (not installable here), after discourse/prometheus_exporter:
# client.rb — Client#register(type, name, help) returns a RemoteMetric whose observe(value, keys)
# sends {type, help, name, keys, value} (send_json; the real one queues it for the collector's
# socket); server/collector.rb — a message of no registered collector type is a custom metric,
# registered by name on first sight ("counter" -> Metric::Counter, "gauge" -> Metric::Gauge) and
# observed with (value, keys): a counter adds, a gauge sets; metric/base.rb — the text names
# every metric default_prefix + name, and the runner sets default_prefix to "ruby_" unless
# --prefix says otherwise. Here the collector is called in-process instead of over HTTP.
module FakePrometheusExporter
  class Collector
    attr_reader :metrics

    def initialize(prefix: "ruby_")
      @prefix = prefix
      @metrics = {}
    end

    def process(json)
      obj = JSON.parse(json)
      metric = (@metrics[obj["name"]] ||= { type: obj["type"], help: obj["help"], data: {} })
      raise ArgumentError, "failed to register metric #{obj}" unless %w[counter gauge].include?(obj["type"])

      keys = obj["keys"] || {}
      if obj["type"] == "counter"
        metric[:data][keys] = metric[:data].fetch(keys, 0) + obj["value"]
      else
        metric[:data][keys] = obj["value"]
      end
    end

    # prefixed name => { labels => value }
    def exposition
      @metrics.to_h { |name, m| [@prefix + name, m[:data]] }
    end
  end

  class Client
    RemoteMetric = Struct.new(:name, :help, :type, :client, keyword_init: true) do
      def observe(value = 1, keys = nil)
        client.send_json(type: type, help: help, name: name, keys: keys, value: value)
      end
    end

    def initialize(collector)
      @collector = collector
    end

    def register(type, name, help)
      RemoteMetric.new(type: type, name: name, help: help, client: self)
    end

    def send_json(obj)
      @collector.process(JSON.dump(obj))
    end
  end
end
