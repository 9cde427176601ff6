# frozen_string_literal: true

module Shop
  # Loads the concurrency-metrics gem (this repository's concurrency-metrics/) without Bundler.
  module ConcurrencyMetrics
    module_function

    def lib_dir(env = ENV)
      return env["CONCURRENCY_METRICS_LIB"] unless env.fetch("CONCURRENCY_METRICS_LIB", "").empty?

      # The image's copy, then the repository's.
      [File.expand_path("../../vendor/concurrency-metrics/lib", __dir__),
       File.expand_path("../../../../concurrency-metrics/lib", __dir__)].find { |d| File.directory?(d) }
    end

    def load!(_store)
      dir = lib_dir
      unless dir && File.directory?(dir)
        warn "concurrency-metrics: not found (CONCURRENCY_METRICS_LIB); exporting the DB pool wait counter only"
        return false
      end
      $LOAD_PATH.unshift(dir)
      true
    end
  end
end
