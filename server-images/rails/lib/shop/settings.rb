# frozen_string_literal: true

module Shop
  class ConfigError < StandardError; end

  # Every variable the image reads, checked once at start (bin/serve) so that a bad deployment
  # stops there naming the variable instead of failing on its first request.
  module Settings
    DATABASE_YMLS = { "default" => "config/database.yml", "pinned" => "config/database.pinned.yml" }.freeze

    module_function

    def check!(env = ENV)
      positive_int(env, "RAILS_MAX_THREADS", 5)
      positive_int(env, "RAILS_MIN_THREADS", 1)
      if env["RAILS_MIN_THREADS"].to_s != "" &&
         Integer(env["RAILS_MIN_THREADS"], 10) > positive_int(env, "RAILS_MAX_THREADS", 5)
        raise ConfigError, "RAILS_MIN_THREADS must not exceed RAILS_MAX_THREADS"
      end
      positive_int(env, "WEB_CONCURRENCY", 1)
      port = positive_int(env, "PORT", 3000)
      raise ConfigError, "PORT must be at most 65535, got #{port}" if port > 65_535

      metrics_port = positive_int(env, "METRICS_PORT", nil)
      raise ConfigError, "METRICS_PORT must be at most 65535, got #{metrics_port}" if metrics_port && metrics_port > 65_535
      raise ConfigError, "METRICS_PORT must differ from PORT (#{port})" if metrics_port == port

      database_yml(env)
      if concurrency_metrics?(env)
        dir = concurrency_metrics_lib(env)
        unless File.file?(File.join(dir, "concurrency_metrics.rb"))
          raise ConfigError, "CONCURRENCY_METRICS=1 but the concurrency-metrics gem is not in #{dir} (CONCURRENCY_METRICS_LIB)"
        end

        concurrency_metrics_sample_rate(env)
      end
      shipping_ms(env)
      positive_int(env, "DB_WAIT_S", 120)
      true
    end

    def database_yml(env)
      name = env.fetch("DATABASE_YML", "default")
      return name if DATABASE_YMLS.key?(name)

      raise ConfigError, "DATABASE_YML must be one of #{DATABASE_YMLS.keys.join(', ')}, got #{name.inspect}"
    end

    def database_yml_path(root, env)
      File.join(root.to_s, DATABASE_YMLS.fetch(database_yml(env)))
    end

    # CONCURRENCY_METRICS=1: load the concurrency-metrics gem (running / I/O-wait / GVL-wait
    # seconds per request, DB pool wait) beside the standard yabeda series.
    def concurrency_metrics?(env)
      case env.fetch("CONCURRENCY_METRICS", "0")
      when "1" then true
      when "0", "" then false
      else raise ConfigError, "CONCURRENCY_METRICS must be 0 or 1, got #{env['CONCURRENCY_METRICS'].inspect}"
      end
    end

    # The gem's lib directory: CONCURRENCY_METRICS_LIB, else the image's copy
    # (/app/vendor/concurrency-metrics/lib), else the repository's.
    def concurrency_metrics_lib(env)
      return env["CONCURRENCY_METRICS_LIB"] unless env.fetch("CONCURRENCY_METRICS_LIB", "").empty?

      vendored = File.expand_path("../../vendor/concurrency-metrics/lib", __dir__)
      File.directory?(vendored) ? vendored : File.expand_path("../../../../concurrency-metrics/lib", __dir__)
    end

    # The share of requests the gem measures (its sample_rate), in (0, 1].
    def concurrency_metrics_sample_rate(env)
      v = env.fetch("CONCURRENCY_METRICS_SAMPLE_RATE", "1")
      rate = Float(v, exception: false)
      return rate if rate&.finite? && rate.positive? && rate <= 1

      raise ConfigError, "CONCURRENCY_METRICS_SAMPLE_RATE must be a number in (0, 1], got #{v.inspect}"
    end

    # What the shipping endpoint's carrier API (the delay server) takes per call, by default.
    def shipping_ms(env)
      v = env.fetch("SHIPPING_MS", "50")
      ms = Float(v, exception: false)
      return ms if ms&.finite? && ms >= 0 && ms <= 60_000

      raise ConfigError, "SHIPPING_MS must be a number of milliseconds in 0..60000, got #{v.inspect}"
    end

    def positive_int(env, name, default)
      v = env[name]
      return default if v.nil? || v.empty?

      n = Integer(v, 10, exception: false)
      return n if n&.positive?

      raise ConfigError, "#{name} must be a positive integer, got #{v.inspect}"
    end
  end
end
