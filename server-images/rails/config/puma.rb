# frozen_string_literal: true

# Puma's configuration as `rails new` writes it (6.1, with the Rails 7.1 worker lines): threads
# from RAILS_MAX_THREADS, the port from PORT, workers from WEB_CONCURRENCY — the variables the
# operator sets. bin/serve has checked them already.

# Puma can serve each request in a thread from an internal thread pool.
# The `threads` method setting takes two numbers: a minimum and maximum.
# Any libraries that use thread pools should be configured to match
# the maximum value specified for Puma. Default is set to 5 threads for minimum
# and maximum; this matches the default thread size of Active Record.
#
max_threads_count = ENV.fetch("RAILS_MAX_THREADS") { 5 }
min_threads_count = ENV.fetch("RAILS_MIN_THREADS") { max_threads_count }
threads min_threads_count, max_threads_count

# Specifies the `port` that Puma will listen on to receive requests; default is 3000.
#
port ENV.fetch("PORT") { 3000 }

# Specifies the `environment` that Puma will run in.
#
environment ENV.fetch("RAILS_ENV") { "production" }

# Specifies the `pidfile` that Puma will use.
pidfile ENV.fetch("PIDFILE") { "tmp/pids/server.pid" }

# Specifies the number of `workers` to boot in clustered mode.
# Workers are forked web server processes. If using threads and workers together
# the concurrency of the application would be max `threads` * `workers`.
# Workers do not work on JRuby or Windows (both of which do not support
# processes).
#
worker_count = Integer(ENV.fetch("WEB_CONCURRENCY") { 1 })
if worker_count > 1
  workers worker_count

  # The workers share one /metrics view through per-worker files (lib/shop/metrics.rb), in a
  # directory made here in the master so that every worker inherits its path — what
  # yabeda-prometheus' DirectFileStore needs in cluster mode.
  require "tmpdir"
  ENV["METRICS_DIR"] = Dir.mktmpdir("shop-metrics-") if ENV.fetch("METRICS_DIR", "").empty?
  Dir.glob(File.join(ENV["METRICS_DIR"], "worker-*")).each { |f| File.delete(f) }

  # yabeda-puma-plugin labels each worker's gauges with its index.
  on_worker_boot { |index| ENV["PUMA_WORKER_INDEX"] = index.to_s }
end

# Allow puma to be restarted by `rails restart` command.
plugin :tmp_restart
