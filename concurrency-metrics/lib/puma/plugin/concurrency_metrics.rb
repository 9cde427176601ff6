# frozen_string_literal: true

require "tmpdir"
require "puma/plugin"
require "concurrency_metrics"
require "concurrency_metrics/exposition"

# `plugin :concurrency_metrics` in config/puma.rb.
#
# - Each worker Puma boots calls ConcurrencyMetrics.after_fork (cluster mode).
# - Cluster mode without prometheus_multiproc_dir: the master creates one directory and sets
#   the variable before forking, so every worker's prometheus-client-mmap files land in the
#   same place (the client otherwise picks a new temporary directory per process).
# - With `concurrency_metrics_port 9394` (or CONCURRENCY_METRICS_PORT=9394), Puma's own process
#   serves GET /metrics on that port for the prometheus_client backend, summing all workers —
#   scrapes never queue behind busy Puma threads. yabeda (yabeda-prometheus' exporter) and
#   prometheus_exporter (its collector) serve their own.
module ConcurrencyMetrics
  module PumaDSL
    def concurrency_metrics_port(port)
      @options[:concurrency_metrics_port] = port
    end

    def concurrency_metrics_bind(host)
      @options[:concurrency_metrics_bind] = host
    end
  end
end
Puma::DSL.include(ConcurrencyMetrics::PumaDSL)

Puma::Plugin.create do
  def config(dsl)
    dsl.on_worker_boot { ConcurrencyMetrics.after_fork }
    ENV["prometheus_multiproc_dir"] ||= Dir.mktmpdir("concurrency-metrics")
  end

  def start(launcher)
    options = launcher.options
    raw = options[:concurrency_metrics_port] || ENV["CONCURRENCY_METRICS_PORT"]
    return if raw.nil? || raw.to_s.empty?

    port = Integer(raw.to_s, 10, exception: false)
    raise ConcurrencyMetrics::ConfigError, "concurrency_metrics_port must be a port number, got #{raw.inspect}" unless port&.between?(0, 65_535)

    host = options[:concurrency_metrics_bind] || ENV.fetch("CONCURRENCY_METRICS_BIND", "0.0.0.0")
    @exposition = ConcurrencyMetrics::Exposition.new(host: host, port: port).start
    # Puma 6 logs through log_writer, Puma 5 through events.
    logger = launcher.respond_to?(:log_writer) ? launcher.log_writer : launcher.events
    logger.log "* concurrency_metrics: /metrics on #{host}:#{@exposition.port}"
  end
end
