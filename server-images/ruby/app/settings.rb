# frozen_string_literal: true

# Environment parsing shared by bin/serve, config/puma.rb, the async launcher and config.ru.
# The interface is the one gvl-sim uses, so the operator renders both servers the same way.
module Reference
  class ConfigError < StandardError; end

  SERVERS = %w[puma falcon].freeze
  IO_MODES = %w[sleep http].freeze
  # Which exporter's series names /metrics uses (the operator's `analysis.metrics.preset`).
  METRICS_NAMES = %w[reference yabeda].freeze

  Settings = Struct.new(
    :server, :workers, :max_threads, :min_threads, :port,
    :cpu_ms, :io_ms, :io_calls, :db_ms, :db_calls, :db_concurrency,
    :io_mode, :delay_url, :metrics_dir, :metrics_port, :metrics_names,
    keyword_init: true
  )

  module Env
    module_function

    # Reads every variable up front so a bad deployment fails at start, naming the variable,
    # instead of failing on the first request.
    def settings(env = ENV)
      server = env.fetch("SERVER", "puma")
      unless SERVERS.include?(server)
        raise ConfigError, "SERVER must be one of #{SERVERS.join(', ')}, got #{server.inspect}"
      end
      max_threads = positive_int(env, "PUMA_MAX_THREADS", nil) ||
                    positive_int(env, "RAILS_MAX_THREADS", 5)
      min_threads = positive_int(env, "PUMA_MIN_THREADS", max_threads)
      if min_threads > max_threads
        raise ConfigError, "PUMA_MIN_THREADS (#{min_threads}) must not exceed the maximum thread count (#{max_threads})"
      end
      io_mode = env.fetch("IO_MODE", "sleep")
      unless IO_MODES.include?(io_mode)
        raise ConfigError, "IO_MODE must be one of #{IO_MODES.join(', ')}, got #{io_mode.inspect}"
      end
      port = positive_int(env, "PORT", 3000)
      raise ConfigError, "PORT must be at most 65535, got #{port}" if port > 65_535

      metrics_port = positive_int(env, "METRICS_PORT", nil)
      raise ConfigError, "METRICS_PORT must be at most 65535, got #{metrics_port}" if metrics_port && metrics_port > 65_535
      raise ConfigError, "METRICS_PORT must differ from PORT (#{port})" if metrics_port == port

      metrics_names = env.fetch("METRICS_NAMES", "reference")
      unless METRICS_NAMES.include?(metrics_names)
        raise ConfigError, "METRICS_NAMES must be one of #{METRICS_NAMES.join(', ')}, got #{metrics_names.inspect}"
      end

      Settings.new(
        server: server,
        workers: positive_int(env, "WEB_CONCURRENCY", 1),
        max_threads: max_threads,
        min_threads: min_threads,
        port: port,
        cpu_ms: non_negative_float(env, "CPU_MS", 0.0),
        io_ms: non_negative_float(env, "IO_MS", 0.0),
        io_calls: non_negative_int(env, "IO_CALLS", 1),
        db_ms: non_negative_float(env, "DB_MS", 0.0),
        db_calls: non_negative_int(env, "DB_CALLS", 0),
        db_concurrency: db_concurrency(env),
        io_mode: io_mode,
        delay_url: blank_to_nil(env["DELAY_URL"]),
        metrics_dir: blank_to_nil(env["METRICS_DIR"]),
        metrics_port: metrics_port,
        metrics_names: metrics_names
      )
    end

    def blank_to_nil(value)
      value.nil? || value.strip.empty? ? nil : value
    end

    def non_negative_float(env, name, default)
      raw = blank_to_nil(env[name])
      return default if raw.nil?

      value = Float(raw, exception: false)
      raise ConfigError, "#{name} must be a number >= 0, got #{raw.inspect}" if value.nil? || !value.finite? || value.negative?

      value
    end

    def non_negative_int(env, name, default)
      raw = blank_to_nil(env[name])
      return default if raw.nil?

      value = Integer(raw, 10, exception: false)
      raise ConfigError, "#{name} must be an integer >= 0, got #{raw.inspect}" if value.nil? || value.negative?

      value
    end

    # The async worker's DB pool: DB_CONCURRENCY, else the pool variables a Rails app's
    # database.yml reads (DB_POOL, RAILS_MAX_THREADS — the operator's dbPool renders both for
    # Falcon, and keeps the baseline's RAILS_MAX_THREADS without it).
    def db_concurrency(env)
      name = %w[DB_CONCURRENCY DB_POOL RAILS_MAX_THREADS].find { |n| blank_to_nil(env[n]) }
      name ? positive_int(env, name, 10) : 10
    end

    def positive_int(env, name, default)
      raw = blank_to_nil(env[name])
      return default if raw.nil?

      value = Integer(raw, 10, exception: false)
      raise ConfigError, "#{name} must be an integer >= 1, got #{raw.inspect}" if value.nil? || value < 1

      value
    end
  end
end
