# frozen_string_literal: true

# Starts the app under Puma and under the async launcher on loopback (through bin/serve, the
# image's entry point), drives the three endpoint shapes and checks /metrics. Run with
#   ruby server-images/ruby/test/server_test.rb
require "minitest/autorun"
require "net/http"
require "socket"
require "timeout"
require "tmpdir"
require_relative "../../../test-support/ruby/free_port"

class ServerTest < Minitest::Test

  ROOT = File.expand_path("..", __dir__)
  SERVE = File.join(ROOT, "bin/serve")

  def teardown
    stop_server
  end

  def test_bad_settings_fail_at_start_naming_the_variable
    {
      { "CPU_MS" => "-1" } => "CPU_MS",
      { "IO_MS" => "abc" } => "IO_MS",
      { "IO_CALLS" => "-2" } => "IO_CALLS",
      { "SERVER" => "unicorn" } => "SERVER",
      { "RAILS_MAX_THREADS" => "0" } => "RAILS_MAX_THREADS",
      { "WEB_CONCURRENCY" => "two" } => "WEB_CONCURRENCY",
      { "PORT" => "70000" } => "PORT",
      { "METRICS_PORT" => "1" } => "METRICS_PORT",
      { "METRICS_NAMES" => "statsd" } => "METRICS_NAMES"
    }.each do |env, variable|
      out = IO.popen(env.merge("PORT" => env.fetch("PORT", "1")), [RbConfig.ruby, SERVE], err: %i[child out], &:read)
      refute $?.success?, "#{env} must not start"
      assert_includes out, variable, "error for #{env} names the variable"
    end
  end

  def test_puma_cluster_serves_the_three_shapes_and_aggregates_metrics
    start_server("SERVER" => "puma", "WEB_CONCURRENCY" => "2", "RAILS_MAX_THREADS" => "4")
    exercise_endpoints("puma")
    assert stop_server.success?, "bin/serve exits 0 when told to stop"
  end

  # Two Puma workers with yabeda's names: each worker's gauges carry its index, the queue
  # histogram is rack_queue_duration_seconds; /healthz answers and is not counted as a request.
  def test_puma_cluster_with_yabeda_names
    start_server("SERVER" => "puma", "WEB_CONCURRENCY" => "2", "RAILS_MAX_THREADS" => "3",
                 "METRICS_NAMES" => "yabeda")
    assert_equal "ok\n", get("/healthz").body
    sent = 0
    m = {}
    # Both workers have served a request (and so published their gauges) within a few rounds.
    20.times do
      4.times do
        stamp = "t=#{(Time.now.to_f * 1000).round}"
        Net::HTTP.start("127.0.0.1", @port) { |http| http.get("/?cpu_ms=1&io_ms=5", "X-Request-Start" => stamp) }
        sent += 1
      end
      m = metrics
      break if m.keys.grep(/\Apuma_max_threads\{/).size == 2
    end
    # Another worker's counters reach /metrics within its flush interval; on a loaded machine
    # that can take longer than the 0.5 s `metrics` waits.
    10.times do
      break if m['rails_requests_total{status="200"}'] == sent && m["rack_queue_duration_seconds_count"] == sent

      m = metrics
    end
    assert_equal %w[puma_max_threads{index="0"} puma_max_threads{index="1"}], m.keys.grep(/\Apuma_max_threads\{/).sort
    assert_equal [3], m.select { |k, _| k.start_with?("puma_max_threads{") }.values.uniq
    assert_equal 2, m.keys.grep(/\Apuma_busy_threads\{index="[01]"\}\z/).size
    assert_equal sent, m['rails_requests_total{status="200"}'], "/healthz and /metrics are not requests"
    assert_equal sent, m["rack_queue_duration_seconds_count"]
    assert_nil m["rails_request_queue_time_seconds_count"]
  end

  def test_async_launcher_serves_the_three_shapes_and_aggregates_metrics
    start_server("SERVER" => "falcon", "WEB_CONCURRENCY" => "2", "DB_CONCURRENCY" => "2")
    exercise_endpoints("falcon")
    assert stop_server.success?, "bin/serve exits 0 when told to stop"
  end

  # A call that blocks without yielding (usleep through Fiddle) stalls the async worker's event
  # loop: the probe's timer runs late for about as long as the calls block, while sleeps that
  # yield to the scheduler leave it on time. Puma exports the counters at 0.
  def test_blocking_calls_show_as_event_loop_lag_in_the_async_server
    start_server("SERVER" => "falcon", "WEB_CONCURRENCY" => "1")
    before = metrics
    10.times { get("/?block_ms=100&io_calls=0") }
    m = metrics
    lag = m["ruby_event_loop_lag_seconds_total"] - before["ruby_event_loop_lag_seconds_total"]
    covered = m["ruby_event_loop_probe_seconds_total"] - before["ruby_event_loop_probe_seconds_total"]
    # 1 s of blocking: the probe was late for most of it (each block delays one 20 ms timer).
    assert_operator lag, :>=, 0.6, "lag #{lag} s over #{covered} s"
    assert_operator covered, :>=, lag
    quiet = metrics
    10.times { get("/?io_ms=100&io_calls=1") }
    m = metrics
    lag = m["ruby_event_loop_lag_seconds_total"] - quiet["ruby_event_loop_lag_seconds_total"]
    covered = m["ruby_event_loop_probe_seconds_total"] - quiet["ruby_event_loop_probe_seconds_total"]
    assert_operator lag / covered, :<, 0.3, "yielding sleeps: lag #{lag} s over #{covered} s"
    stop_server
    start_server("SERVER" => "puma")
    m = metrics
    assert_equal 0, m["ruby_event_loop_lag_seconds_total"]
    assert_equal 0, m["ruby_event_loop_probe_seconds_total"]
  end

  # One GVL: four threads each needing 100 ms of CPU cannot all run at once, and the waiting
  # must show up as GVL wait (estimated on Ruby 3.1, measured with gvltools on 3.2+). Started
  # together they would wait 0 + 100 + 200 + 300 ms. Each request first waits 400 ms on a
  # "query" (GVL released): without it Puma's accept loop, which needs the GVL too, took the
  # next connection only after the running request's CPU burst, so the requests ran one after
  # another (8 ms of GVL wait in a CI run). With it every request is in its thread before any
  # CPU work starts, even with the client's threads staggered on a busy machine (0.20 s seen).
  def test_puma_threads_contending_for_the_gvl_report_gvl_wait
    start_server("SERVER" => "puma", "RAILS_MAX_THREADS" => "4")
    Array.new(4) { Thread.new { get("/?cpu_ms=100&io_calls=0&db_calls=1&db_ms=400") } }.each(&:join)
    m = metrics
    assert_equal 4, m['rails_requests_total{status="200"}']
    assert_operator m["ruby_running_seconds_total"], :>=, 0.4
    assert_operator m["ruby_gvl_wait_seconds_total"], :>=, 0.1
  end

  # Under the fiber scheduler sleeps and Net::HTTP calls must overlap (one worker, one thread).
  # Serialized, 20 requests of 2 x 300 ms would take 12 s; the bound is loose on purpose.
  def test_async_launcher_overlaps_waits_of_concurrent_requests
    start_server("SERVER" => "falcon", "WEB_CONCURRENCY" => "1")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    codes = Array.new(20) { Thread.new { get("/c?db_calls=0&cpu_ms=0").code } }.map(&:value)
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal ["200"] * 20, codes
    assert_operator elapsed, :<, 6.0
    assert_in_delta 20 * 0.6, metrics["ruby_io_wait_seconds_total"], 1e-6
  end

  # X-Request-Start (as a load balancer sets it) to a Puma thread picking the request up:
  # the second request waits behind the first for the only thread, and that wait is recorded
  # as queue time although its own duration is short. Requests without the header are not.
  def test_puma_records_the_wait_for_a_thread_as_queue_time
    start_server("SERVER" => "puma", "RAILS_MAX_THREADS" => "1")
    busy = Thread.new { get("/b?io_ms=800").code }
    sleep 0.2
    stamp = "t=#{(Time.now.to_f * 1000).round}"
    queued = Net::HTTP.start("127.0.0.1", @port, read_timeout: 30) do |http|
      http.get("/a", "X-Request-Start" => stamp)
    end
    assert_equal "200", queued.code
    assert_equal "200", busy.value
    assert_equal "200", get("/a").code
    m = metrics
    assert_equal 1, m["rails_request_queue_time_seconds_count"]
    # It waited about 0.6 s for the thread (0.8 s busy, sent 0.2 s in).
    assert_operator m["rails_request_queue_time_seconds_sum"], :>=, 0.3
    assert_operator m["rails_request_queue_time_seconds_sum"], :<, 5.0
  end

  # METRICS_PORT is served by bin/serve from the workers' files, so it answers while every
  # Puma thread is busy (the app port's /metrics would queue behind the busy request).
  def test_metrics_port_answers_while_all_puma_threads_are_busy
    metrics_port = FreePort.take
    start_server("SERVER" => "puma", "RAILS_MAX_THREADS" => "1", "METRICS_PORT" => metrics_port.to_s)
    busy = Thread.new { get("/b?io_ms=3000").code }
    saw_full_pool = false
    30.times do
      text = Net::HTTP.get(URI("http://127.0.0.1:#{metrics_port}/metrics"))
      saw_full_pool = text.match?(/^puma_pool_capacity\{worker="\d+"\} 0$/)
      break if saw_full_pool

      sleep 0.1
    end
    assert saw_full_pool, "the listener reports a Puma with no free thread"
    assert busy.alive?, "...while the only thread is still busy"
    assert_equal "200", busy.value
    assert_equal "404", Net::HTTP.get_response(URI("http://127.0.0.1:#{metrics_port}/other")).code
    sleep 0.5
    text = Net::HTTP.get(URI("http://127.0.0.1:#{metrics_port}/metrics"))
    assert_includes text, %(rails_requests_total{status="200"} 1\n)
    assert_includes text, "reference_app_worker_processes 1\n"
  end

  private

  def exercise_endpoints(server)
    assert_equal "200", get("/a").code
    assert_equal "200", get("/b?io_ms=200").code
    assert_equal "200", get("/c?io_ms=100").code
    assert_equal "200", get("/?cpu_ms=30&io_ms=20&io_calls=2").code
    bad = get("/?io_ms=-3")
    assert_equal "400", bad.code
    assert_includes bad.body, "io_ms"
    assert_equal "404", get("/nope").code

    m = metrics
    assert_equal 4, m['rails_requests_total{status="200"}']
    assert_equal 1, m['rails_requests_total{status="400"}']
    assert_equal 1, m['rails_requests_total{status="404"}']
    assert_equal 6, m["rails_request_duration_seconds_count"]
    buckets = m.select { |k, _| k.start_with?("rails_request_duration_seconds_bucket") }.values
    assert_equal buckets.sort, buckets, "buckets are cumulative"
    assert_equal 6, m['rails_request_duration_seconds_bucket{le="+Inf"}']
    # 2 ms (a) + 200 ms (b) + 5 x 2 ms + 2 x 100 ms (c) + 2 x 20 ms (/): every simulated
    # dependency returns no earlier than its nominal time, so io wait is exactly the sum.
    assert_in_delta 0.452, m["ruby_io_wait_seconds_total"], 1e-6
    assert_operator m["ruby_running_seconds_total"], :>=, 0.0315
    assert_operator m["ruby_gvl_wait_seconds_total"], :>=, 0.0
    # b alone waits 200 ms, so the histogram sum is at least the io wait.
    assert_operator m["rails_request_duration_seconds_sum"], :>=, 0.452
    info = m.keys.grep(/\Aruby_gvl_metrics_info/).first
    assert_includes info, %(server="#{server}")
    assert_includes info, %(gvl_source="estimate") if RUBY_VERSION < "3.2"
    assert_includes 1..2, m["reference_app_worker_processes"]
    pool = m.select { |k, _| k.start_with?("puma_max_threads{") }
    if server == "puma"
      assert_includes 1..2, pool.size, "one puma_max_threads per live worker"
      assert_equal [4], pool.values.uniq
      assert m.select { |k, _| k.start_with?("puma_backlog{") }.values.all? { |v| v >= 0 }
    else
      assert_empty pool
    end
  end

  # Other workers publish their counters at most Metrics::FLUSH_INTERVAL (0.2 s) late.
  def metrics
    sleep 0.5
    get("/metrics").body.lines.reject { |l| l.start_with?("#") }.to_h do |line|
      key, value = line.split(" ", 2)
      [key, value.include?(".") || value.include?("e") ? Float(value) : Integer(value)]
    end
  end

  def get(path)
    Net::HTTP.start("127.0.0.1", @port, read_timeout: 30) { |http| http.get(path) }
  end

  def start_server(env)
    @port = FreePort.take
    @log = File.open(File.join(Dir.tmpdir, "reference-app-test-#{@port}.log"), "w+")
    @pid = Process.spawn(env.merge("PORT" => @port.to_s, "BIND_HOST" => "127.0.0.1"),
                         RbConfig.ruby, SERVE, out: @log, err: @log, pgroup: true)
    Timeout.timeout(30) do
      loop do
        break if get("/metrics").code == "200"
      rescue SystemCallError, EOFError
        sleep 0.1
      end
    end
  rescue Timeout::Error
    @log.rewind
    flunk "server did not start:\n#{@log.read}"
  end

  # Returns bin/serve's exit status (nil if it had to be killed or was already gone).
  def stop_server
    return unless @pid

    Process.kill("TERM", @pid)
    Timeout.timeout(15) { Process.wait2(@pid).last }
  rescue Timeout::Error
    Process.kill("KILL", -@pid) # the process group this test created
    Process.wait(@pid)
    nil
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
    @log&.close
  end
end
