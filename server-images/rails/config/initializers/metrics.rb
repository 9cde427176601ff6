# frozen_string_literal: true

# /metrics (config.ru mounts the exporter): the yabeda gems' series, and with
# CONCURRENCY_METRICS=1 the concurrency-metrics gem's series (the DB pool wait counter among them).
Shop::Metrics.install!(Shop::Metrics::Store.new(dir: ENV["METRICS_DIR"].presence))
Shop::ConcurrencyMetrics.start!(Shop::Metrics.store) if Shop::Settings.concurrency_metrics?(ENV)
