# frozen_string_literal: true

require_relative "adapters/yabeda"
require_relative "adapters/prometheus_exporter"
require_relative "adapters/prometheus_client"

module ConcurrencyMetrics
  # A backend is any object with
  #   setup(info)    — register the series (idempotent); info is the Hash of
  #                    ruby_gvl_metrics_info's labels (gvl_source, sample_rate, ruby_version);
  #   record(sample) — add one sampled request (a Sample, seconds) to the counters;
  #   after_fork     — optional, called in each new worker process;
  #   setup_totals(fields), add(field, seconds) — optional: the unsampled counters of
  #                    Names::TOTALS that are switched on (the DB pool wait), and one wait.
  # The three below translate that to yabeda, prometheus_exporter and the Prometheus client;
  # each touches only its library's public API, named in its comments.
  module Adapters
    module_function

    def build(backend, config)
      case backend
      when :yabeda
        require_library("yabeda", "yabeda")
        Yabeda.new(::Yabeda)
      when :prometheus_exporter
        require_library("prometheus_exporter/client", "prometheus_exporter")
        PrometheusExporter.new(config.prometheus_exporter_client || ::PrometheusExporter::Client.default)
      when :prometheus_client
        require_library("prometheus/client", "prometheus-client or prometheus-client-mmap")
        PrometheusClient.new(config.prometheus_registry || ::Prometheus::Client.registry)
      else
        backend
      end
    end

    def require_library(path, gem)
      require path
    rescue LoadError => e
      raise ConfigError, "backend needs the #{gem} gem in the Gemfile (#{e.message})"
    end
  end
end
