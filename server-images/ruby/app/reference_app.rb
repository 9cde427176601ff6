# frozen_string_literal: true

require "net/http"
require "uri"
require "rack/utils"
require_relative "settings"
require_relative "timing"
require_relative "metrics"
require_relative "request_start"

module Reference
  # The three endpoint shapes of the Puma-vs-Falcon benchmark (seed 000), each a set of
  # defaults that the query string can override:
  #   /a  a quick DB-like step (one short query)
  #   /b  a 0.5 s I/O wait (sleep, like the seed's pattern B)
  #   /c  five short queries, then two sequential external HTTP calls of 300 ms each
  #   /   the work configured by CPU_MS, IO_MS, IO_CALLS, DB_MS, DB_CALLS, IO_MODE
  # Query parameters: cpu_ms, io_ms, io_calls, db_ms, db_calls, io_mode (sleep|http), block_ms
  # (a C call that blocks without yielding — seed 004's MiniMagick shell-out: off the GVL, so
  # Puma's other threads run on; under an async server the whole worker's event loop stalls).
  class App
    PATTERNS = {
      "/a" => { cpu_ms: 0.5, io_ms: 0.0, io_calls: 0, db_ms: 2.0, db_calls: 1, io_mode: "sleep" },
      "/b" => { cpu_ms: 0.0, io_ms: 500.0, io_calls: 1, db_ms: 0.0, db_calls: 0, io_mode: "sleep" },
      "/c" => { cpu_ms: 1.0, io_ms: 300.0, io_calls: 2, db_ms: 2.0, db_calls: 5, io_mode: "http" }
    }.freeze
    FLOAT_PARAMS = %i[cpu_ms io_ms db_ms block_ms].freeze
    INT_PARAMS = %i[io_calls db_calls].freeze
    MAX_MS = 600_000.0
    MAX_CALLS = 1000

    class BadRequest < StandardError; end

    # db_limiter: nil (threads already bound DB concurrency) or an object with #acquire and
    # #release such as Async::Semaphore (the seed's DB_SEMAPHORE under Falcon).
    def initialize(settings, db_limiter: nil)
      @settings = settings
      @db_limiter = db_limiter
      @defaults = {
        cpu_ms: settings.cpu_ms, io_ms: settings.io_ms, io_calls: settings.io_calls,
        db_ms: settings.db_ms, db_calls: settings.db_calls, io_mode: settings.io_mode, block_ms: 0.0
      }
      @delay_uri = settings.delay_url && URI(settings.delay_url)
    end

    def call(env)
      defaults = PATTERNS.fetch(env["PATH_INFO"]) do
        return text(404, "not found\n") unless env["PATH_INFO"] == "/" || env["PATH_INFO"].to_s.empty?

        @defaults
      end
      work = parse(env["QUERY_STRING"], defaults)
      timing = env["reference.timing"]
      run(work, timing)
      text(200, "ok cpu_ms=#{work[:cpu_ms]} io_ms=#{work[:io_ms]}x#{work[:io_calls]} " \
                "db_ms=#{work[:db_ms]}x#{work[:db_calls]} io_mode=#{work[:io_mode]}\n")
    rescue BadRequest => e
      text(400, "#{e.message}\n")
    rescue Errno::ECONNREFUSED, Net::OpenTimeout, Net::ReadTimeout, IOError => e
      text(502, "dependency failed: #{e.class}: #{e.message}\n")
    end

    private

    def run(work, timing)
      block(work[:block_ms] / 1000.0, timing) if work.fetch(:block_ms, 0).positive?
      work[:db_calls].times { db_query(work[:db_ms], timing) }
      burn_cpu(work[:cpu_ms] / 1000.0)
      work[:io_calls].times { dependency_call(work[:io_ms], work[:io_mode], timing) }
    end

    def db_query(ms, timing)
      seconds = ms / 1000.0
      return if seconds <= 0 # a zero-length sleep would still yield to the scheduler

      if @db_limiter
        # Waiting for a slot is pool wait, not I/O, so acquire and release are separate.
        timing.pool_wait { @db_limiter.acquire }
        begin
          timing.io_wait(seconds) { sleep(seconds) }
        ensure
          @db_limiter.release
        end
      else
        timing.io_wait(seconds) { sleep(seconds) }
      end
    end

    def dependency_call(ms, mode, timing)
      seconds = ms / 1000.0
      if mode == "http"
        timing.io_wait(seconds) { http_delay(ms) } # a real round trip even for 0 ms
      elsif seconds.positive?
        timing.io_wait(seconds) { sleep(seconds) }
      end
    end

    # libc usleep through Fiddle: the thread sleeps off the GVL, but the fiber scheduler never
    # hears of it, so an async worker's reactor cannot run any other fiber meanwhile.
    def block(seconds, timing)
      require "fiddle"
      @usleep ||= Fiddle::Function.new(Fiddle.dlopen(nil)["usleep"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT)
      timing.io_wait(seconds) { @usleep.call((seconds * 1_000_000).round) }
    end

    # A real socket round trip to the delay server (bin/delay-server): Net::HTTP blocks the
    # thread without the GVL under Puma and yields to the fiber scheduler under async.
    def http_delay(ms)
      raise BadRequest, "io_mode=http needs DELAY_URL (bin/serve starts a delay server)" unless @delay_uri

      uri = @delay_uri.dup
      uri.query = "ms=#{ms}"
      Net::HTTP.start(uri.host, uri.port, open_timeout: 5, read_timeout: 5 + ms / 1000.0) do |http|
        response = http.get(uri.request_uri)
        raise IOError, "delay server answered #{response.code}" unless response.code == "200"
      end
    end

    # Real Ruby computation (holds the GVL) until this thread has used `seconds` of CPU time,
    # so the amount of work is the same however often the thread is preempted.
    def burn_cpu(seconds)
      return if seconds <= 0

      deadline = Timing.thread_cpu + seconds
      x = 0
      while Timing.thread_cpu < deadline
        500.times { |i| x = (x * 31 + i) % 1_000_003 }
      end
      x
    end

    def parse(query, defaults)
      work = defaults.dup
      Rack::Utils.parse_query(query.to_s).each do |key, value|
        name = key.to_sym
        if FLOAT_PARAMS.include?(name)
          v = Float(value.to_s, exception: false)
          raise BadRequest, "#{key} must be a number between 0 and #{MAX_MS.to_i}" if v.nil? || !v.finite? || v.negative? || v > MAX_MS

          work[name] = v
        elsif INT_PARAMS.include?(name)
          v = Integer(value.to_s, 10, exception: false)
          raise BadRequest, "#{key} must be an integer between 0 and #{MAX_CALLS}" if v.nil? || v.negative? || v > MAX_CALLS

          work[name] = v
        elsif name == :io_mode
          raise BadRequest, "io_mode must be one of #{IO_MODES.join(', ')}" unless IO_MODES.include?(value)

          work[name] = value
        end
      end
      work
    end

    def text(status, body)
      [status, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    end
  end

  # Times every request except /metrics and /healthz (the readiness probe) and records it.
  class Instrument
    attr_reader :metrics

    def initialize(app, metrics, timing_mode, fibers:)
      @app = app
      @metrics = metrics
      @timing_mode = timing_mode
      @fibers = fibers
    end

    def call(env)
      if env["PATH_INFO"] == "/metrics"
        body = @metrics.render
        return [200, { "content-type" => "text/plain; version=0.0.4", "content-length" => body.bytesize.to_s }, [body]]
      end
      return [200, { "content-type" => "text/plain", "content-length" => "3" }, ["ok\n"]] if env["PATH_INFO"] == "/healthz"

      @metrics.attach_server(Puma::Server.current) if defined?(Puma::Server) && Puma::Server.respond_to?(:current)
      # The app picks the request up now: a Puma thread took it / Falcon started its fiber.
      queued = RequestStart.queue_time_from_env(env)
      @metrics.record_queue_time(queued) if queued
      timing = Timing.new(@timing_mode, fibers: @fibers)
      env["reference.timing"] = timing
      status, headers, body = @app.call(env)
      @metrics.record(status, timing.finish)
      [status, headers, body]
    rescue StandardError => e
      @metrics.record(500, timing.finish) if timing
      body = "internal error: #{e.class}\n"
      [500, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    end
  end

  # Builds the instrumented app for the server named by settings.server.
  def self.build(settings, db_limiter: nil)
    source = GvlSource.label_for(settings.server)
    metrics = Metrics.new(dir: settings.metrics_dir, server: settings.server, gvl_source: source,
                          names: settings.metrics_names)
    Instrument.new(App.new(settings, db_limiter: db_limiter), metrics, source == "gvltools" ? :measured : :estimate,
                   fibers: settings.server == "falcon")
  end
end
