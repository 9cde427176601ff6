# frozen_string_literal: true

# /metrics (config.ru mounts the exporter): the yabeda gems' series, and with
# CONCURRENCY_METRICS=1 the DB pool wait counter and the concurrency-metrics gem's series.
with_gem = Shop::Settings.concurrency_metrics?(ENV)
Shop::Metrics.install!(Shop::Metrics::Store.new(dir: ENV["METRICS_DIR"].presence), pool_wait: with_gem)
Shop::ConcurrencyMetrics.start!(Shop::Metrics.store) if with_gem
