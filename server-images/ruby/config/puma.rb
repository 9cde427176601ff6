# frozen_string_literal: true

# Puma configuration read from the environment the operator renders:
# WEB_CONCURRENCY (processes), RAILS_MAX_THREADS or PUMA_MAX_THREADS / PUMA_MIN_THREADS, PORT.
require "tmpdir"
require_relative "../app/settings"

settings = Reference::Env.settings(ENV)

workers settings.workers if settings.workers > 1
threads settings.min_threads, settings.max_threads
port settings.port, ENV.fetch("BIND_HOST", "0.0.0.0")
environment ENV.fetch("RACK_ENV", "production")

# Several workers share one /metrics view through per-worker files (app/metrics.rb). The
# directory is created here, in the master, so every worker inherits the same path.
if settings.workers > 1 && settings.metrics_dir.nil?
  ENV["METRICS_DIR"] = Dir.mktmpdir("reference-metrics-")
elsif settings.workers > 1
  Dir.glob(File.join(settings.metrics_dir, "worker-*.metrics*")).each { |f| File.delete(f) }
end

# yabeda-puma-plugin labels its gauges with the worker's index (0 in single mode).
on_worker_boot { |index| ENV["PUMA_WORKER_INDEX"] = index.to_s } if settings.workers > 1
