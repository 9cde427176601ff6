# frozen_string_literal: true

require "minitest/autorun"
require "net/http"
require "socket"
require "tmpdir"
require "fileutils"
require "tempfile"
require "json"
require_relative "../../../test-support/ruby/free_port"

module RailsAppTest
  ROOT = File.expand_path("..", __dir__)

  # name{labels} => value of every sample of a /metrics text.
  def self.parse_metrics(text)
    text.lines.reject { |l| l.start_with?("#") }.to_h do |l|
      k, v = l.strip.rpartition(" ").values_at(0, 2)
      [k, Float(v)]
    end
  end

  # One PostgreSQL 15 for the whole run, started by the image's own entry point
  # (rootfs/postgres-start) on loopback; stopped when the tests end.
  module Postgres
    module_function

    LOCK = Mutex.new

    # Tests run in parallel (each starts its own servers); the first to ask starts it.
    def port
      LOCK.synchronize { @port ||= start }
    end

    def env
      { "PGHOST" => "127.0.0.1", "PGPORT" => port.to_s, "PGUSER" => "shop", "PGPASSWORD" => "test" }
    end

    def psql(sql, db: "postgres")
      out = IO.popen(env.merge("PGDATABASE" => db), ["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                     err: %i[child out], &:read)
      raise "psql #{sql.inspect}: #{out}" unless $?.success?

      out.strip
    end

    def create_database(name)
      psql("CREATE DATABASE #{name}")
    end

    def start
      # Readable by the postgres user the script hands over to when it runs as root.
      @dir = Dir.mktmpdir("rails-app-test-pg-")
      File.chmod(0o755, @dir)
      port = FreePort.take
      @pid = Process.spawn({ "PGDATA" => File.join(@dir, "data"), "POSTGRES_PASSWORD" => "test",
                             "POSTGRES_PORT" => port.to_s, "POSTGRES_LISTEN" => "127.0.0.1",
                             "POSTGRES_SOCKET_DIR" => File.join(@dir, "sock") },
                           File.join(ROOT, "rootfs/postgres-start"), %i[out err] => File.join(@dir, "log"))
      Minitest.after_run { stop }
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
      loop do
        TCPSocket.open("127.0.0.1", port).close
        return port
      rescue SystemCallError
        raise "PostgreSQL did not start: #{File.read(File.join(@dir, 'log'))}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.1
      end
    end

    def stop
      return unless @pid

      Process.kill("INT", @pid) # fast shutdown: open connections do not hold it up
      Process.wait(@pid)
      FileUtils.rm_rf(@dir)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  # bin/serve, the image's entry point, on a free port; #stop sends TERM like the kubelet.
  class Server
    attr_reader :port, :log

    def initialize(env)
      @port = FreePort.take
      @log = Tempfile.create("rails-app-test-serve-")
      @pid = Process.spawn(Postgres.env.merge("PORT" => @port.to_s, "RAILS_LOG_LEVEL" => "warn").merge(env),
                           RbConfig.ruby, File.join(ROOT, "bin/serve"), %i[out err] => @log.path,
                           pgroup: true)
    end

    def wait_ready(timeout: 120)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        return if (get("/healthz").code == "200" rescue false)
        raise "bin/serve did not become ready: #{output}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        raise "bin/serve exited: #{output}" if Process.wait(@pid, Process::WNOHANG)

        sleep 0.2
      end
    end

    def ready?
      get("/healthz").code == "200"
    rescue SystemCallError
      false
    end

    def output
      File.read(@log.path)
    end

    def get(path, headers = {})
      Net::HTTP.start("127.0.0.1", @port, read_timeout: 30) { |h| h.get(path, headers) }
    end

    def post(path, form)
      Net::HTTP.start("127.0.0.1", @port, read_timeout: 30) { |h| h.post(path, URI.encode_www_form(form)) }
    end

    def metrics
      RailsAppTest.parse_metrics(get("/metrics").body)
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      _, status = Process.wait2(@pid)
      @pid = nil
      status
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end
end
