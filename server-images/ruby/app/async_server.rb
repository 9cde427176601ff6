# frozen_string_literal: true

require "stringio"
require "rack"
require "async"
require "async/http/server"
require "async/http/endpoint"
require "async/io/shared_endpoint"
require "protocol/http/response"

module Reference
  # What Falcon does, reduced to what this app needs, on Debian's async-http 0.59 (Falcon
  # itself is not packaged): the listening socket is bound once, WEB_CONCURRENCY worker
  # processes are forked, and each runs one event loop (Async reactor with the Ruby 3 fiber
  # scheduler) in which every request is its own fiber.
  class RackAdapter
    def initialize(app)
      @app = app
    end

    def call(request)
      status, headers, body = @app.call(env_for(request))
      chunks = []
      body.each { |chunk| chunks << chunk }
      body.close if body.respond_to?(:close)
      fields = headers.map { |k, v| [k.to_s.downcase, v.to_s] }
                      .reject { |k, _| %w[content-length connection transfer-encoding].include?(k) }
      Protocol::HTTP::Response[status.to_i, fields, chunks]
    end

    private

    def env_for(request)
      path, query = request.path.split("?", 2)
      host, port = request.authority.to_s.split(":", 2)
      env = {
        "REQUEST_METHOD" => request.method,
        "SCRIPT_NAME" => "",
        "PATH_INFO" => path,
        "QUERY_STRING" => query.to_s,
        "SERVER_NAME" => host || "localhost",
        "SERVER_PORT" => port || "80",
        "SERVER_PROTOCOL" => request.version.to_s,
        "REMOTE_ADDR" => request.remote_address&.ip_address,
        "rack.version" => Rack::VERSION,
        "rack.url_scheme" => request.scheme || "http",
        "rack.input" => StringIO.new(request.body ? request.body.join.to_s : ""),
        "rack.errors" => $stderr,
        "rack.multithread" => false,
        "rack.multiprocess" => true,
        "rack.run_once" => false
      }
      request.headers.each do |key, value|
        name = key.upcase.tr("-", "_")
        name = "HTTP_#{name}" unless %w[CONTENT_TYPE CONTENT_LENGTH].include?(name)
        env[name] = value.to_s
      end
      env
    end
  end

  # How late the worker's event loop runs a timer: every PERIOD it sleeps PERIOD and records how
  # much later than due it woke, and the time covered. A blocking call (a shell-out, a C
  # extension that keeps the GVL, sync file I/O) stalls every fiber of the worker — the late
  # share shows it where mean latency at low load does not (issue 29, seed 004's MiniMagick).
  module EventLoopProbe
    PERIOD = 0.02

    def self.run(metrics)
      loop do
        t0 = Timing.now
        sleep PERIOD
        covered = Timing.now - t0
        metrics.record_loop_lag([covered - PERIOD, 0.0].max, covered)
      end
    end
  end

  class AsyncServer
    def initialize(settings, rackup: File.expand_path("../config.ru", __dir__), host: ENV.fetch("BIND_HOST", "0.0.0.0"))
      @settings = settings
      @rackup = rackup
      @endpoint = Async::HTTP::Endpoint.parse("http://#{host}:#{settings.port}")
    end

    def run
      bound = Async::Reactor.run { Async::IO::SharedEndpoint.bound(@endpoint, backlog: 4096) }.wait
      $stdout.puts "async server: #{@settings.workers} worker(s) on #{@endpoint}, DB_CONCURRENCY=#{@settings.db_concurrency}"
      $stdout.flush
      return serve(bound) if @settings.workers == 1

      pids = Array.new(@settings.workers) { fork { serve(bound) } }
      %w[TERM INT].each do |sig|
        Signal.trap(sig) { pids.each { |pid| Process.kill(sig, pid) rescue Errno::ESRCH } }
      end
      statuses = pids.map { |pid| Process.wait2(pid).last }
      exit(statuses.all?(&:success?) ? 0 : 1)
    end

    private

    # Loads config.ru inside the worker so the app (and its Async::Semaphore) belongs to it.
    def serve(bound)
      Signal.trap("TERM") { exit(0) }
      Signal.trap("INT") { exit(0) }
      app, = Rack::Builder.parse_file(@rackup)
      Async::Reactor.run do |task|
        task.async { EventLoopProbe.run(app.metrics) } if app.respond_to?(:metrics)
        server = Async::HTTP::Server.new(RackAdapter.new(app), bound,
                                         protocol: @endpoint.protocol, scheme: @endpoint.scheme)
        server.run
      end
    end
  end
end
