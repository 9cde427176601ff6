# frozen_string_literal: true

require_relative "test_helper"
require "net/http"
require "socket"
require "json"
require_relative "../../test-support/ruby/free_port"

# Debian's Puma in cluster mode (2 workers x 4 threads) with the plugin and the middleware:
# concurrent requests from several threads in two processes add up exactly. With
# prometheus-client-mmap (Debian 12) on the prometheus_client backend, read from the plugin's
# /metrics port; without it (Debian 13's Ruby 3.3 has no package) through a backend that writes
# each worker's totals to a file, which still checks Puma, the plugin and the threads.
class PumaTest < Minitest::Test
  REQUESTS = 40
  CLIENTS = 8
  IO_S = 0.02
  CPU_S = 0.005

  def setup
    skip "puma not installed" unless (@puma = puma_bin)
    @mmap = begin
      require "prometheus/client/formats/text"
      true
    rescue LoadError
      false
    end
    @dir = Dir.mktmpdir("cm-puma")
    @port = FreePort.take
    @metrics_port = FreePort.take
    File.write(File.join(@dir, "config.ru"), <<~RUBY)
      require "concurrency_metrics"
      require "json"
      # Each worker's totals in its own file (the adapter interface: setup, record).
      class FileTotals
        def initialize(dir) = (@dir = dir; @mutex = Mutex.new; @t = Hash.new(0))
        def setup(_info) = nil
        def record(s)
          @mutex.synchronize do
            @t["requests"] += 1
            s.to_h.each { |k, v| @t[k.to_s] += v }
            File.write(File.join(@dir, "totals-\#{Process.pid}.json"), JSON.dump(@t))
          end
        end
      end
      ConcurrencyMetrics.configure { |c| c.backend = #{@mmap ? ':prometheus_client' : "FileTotals.new(#{@dir.inspect})"} }
      use ConcurrencyMetrics::Middleware
      run(lambda do |_env|
        deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + #{CPU_S}
        nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
        ConcurrencyMetrics.io_wait { sleep #{IO_S} }
        [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
      end)
    RUBY
    File.write(File.join(@dir, "puma.rb"), <<~RUBY)
      workers 2
      threads 4, 4
      bind "tcp://127.0.0.1:#{@port}"
      rackup "#{File.join(@dir, 'config.ru')}"
      plugin :concurrency_metrics
      #{@mmap ? "concurrency_metrics_port #{@metrics_port}" : ''}
      concurrency_metrics_bind "127.0.0.1"
    RUBY
    env = { "RUBYLIB" => [LIB, NativeBuild.dir, ENV["RUBYLIB"]].compact.join(":"),
            "prometheus_multiproc_dir" => nil }
    @log = File.join(@dir, "puma.log")
    @pid = Process.spawn(env, @puma, "-C", File.join(@dir, "puma.rb"), chdir: @dir,
                                                                         out: @log, err: @log, pgroup: true)
  end

  def teardown
    if @pid
      Process.kill("TERM", -@pid)
      Process.wait(@pid)
    end
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_cluster_mode_counts_every_request_once
    wait_until_up
    pids = Queue.new
    Array.new(CLIENTS) do
      Thread.new do
        Net::HTTP.start("127.0.0.1", @port) do |http|
          (REQUESTS / CLIENTS).times { pids << http.get("/work").body }
        end
      end
    end.each(&:join)
    served_by = Array.new(pids.size) { pids.pop }.uniq
    assert_operator served_by.size, :>=, 2, "both workers served requests"

    value = @mmap ? from_metrics_port : from_files
    assert_equal REQUESTS, value.call("ruby_sampled_requests_total")
    # Estimate mode: the kernel's run-queue wait after each wake-up is its own counter.
    io = value.call("ruby_io_wait_seconds_total") + value.call("ruby_cpu_runqueue_wait_seconds_total")
    assert_operator io, :>=, REQUESTS * IO_S * 0.95
    assert_operator value.call("ruby_running_seconds_total"), :>=, REQUESTS * CPU_S
    assert_operator value.call("ruby_sampled_request_duration_seconds_total"), :>=, REQUESTS * (IO_S + CPU_S)
    assert_operator value.call("ruby_gvl_wait_seconds_total"), :>=, 0
  end

  private

  def from_metrics_port
    text = Net::HTTP.get(URI("http://127.0.0.1:#{@metrics_port}/metrics"))
    ->(name) { Float(text[/^#{name} (\S+)$/, 1] || flunk("#{name} missing:\n#{text}\n#{File.read(@log)}")) }
  end

  def from_files
    totals = Dir[File.join(@dir, "totals-*.json")].map { |f| JSON.parse(File.read(f)) }
    assert_equal 2, totals.size, "one file per worker"
    field = { "ruby_sampled_requests_total" => "requests", "ruby_io_wait_seconds_total" => "io_wait",
              "ruby_running_seconds_total" => "running", "ruby_gvl_wait_seconds_total" => "gvl_wait",
              "ruby_cpu_runqueue_wait_seconds_total" => "runqueue_wait",
              "ruby_sampled_request_duration_seconds_total" => "wall" }
    ->(name) { totals.sum { |t| t.fetch(field.fetch(name)) } }
  end

  def puma_bin
    ENV.fetch("PATH", "").split(":").map { |d| File.join(d, "puma") }.find { |f| File.executable?(f) }
  end

  def wait_until_up
    deadline = Time.now + 30
    loop do
      # Both the app (/healthz is not measured) and the plugin's listener, both workers booted.
      Net::HTTP.get(URI("http://127.0.0.1:#{@port}/healthz"))
      Net::HTTP.get(URI("http://127.0.0.1:#{@metrics_port}/metrics")) if @mmap
      return if File.read(@log).scan(/booted in|Worker \d+ \(PID: \d+\) booted/).size >= 2
    rescue SystemCallError, IOError
      nil
    ensure
      flunk "puma did not start:\n#{File.read(@log)}" if Time.now > deadline
      sleep 0.1
    end
  end
end
