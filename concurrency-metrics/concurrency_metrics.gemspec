# frozen_string_literal: true

require_relative "lib/concurrency_metrics/version"

Gem::Specification.new do |spec|
  spec.name = "concurrency_metrics"
  spec.version = ConcurrencyMetrics::VERSION
  spec.summary = "Per-request running, I/O-wait and GVL-wait seconds for Rack/Puma apps, as Prometheus counters"
  spec.description = "A Rack middleware and a Puma plugin that publish ruby_running_seconds_total, " \
                     "ruby_io_wait_seconds_total and ruby_gvl_wait_seconds_total (the series " \
                     "concurrency-operator reads) through yabeda, prometheus_exporter or the Prometheus client. " \
                     "GVL wait from the GVL instrumentation API on Ruby >= 3.2 (a small C extension), " \
                     "a documented estimate before."
  spec.authors = ["concurrency-operator"]
  spec.license = "Apache-2.0"
  spec.required_ruby_version = ">= 3.0"
  spec.files = Dir["lib/**/*.rb", "ext/**/*.{c,rb}", "README.md"]
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/concurrency_metrics/extconf.rb"]
  # No runtime dependency: the app brings the backend it uses (yabeda, prometheus_exporter,
  # prometheus-client or prometheus-client-mmap) and Rack/Puma.
  spec.add_development_dependency "minitest", ">= 5"
end
