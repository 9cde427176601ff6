# frozen_string_literal: true

# The metrics store and the per-request time split, without a server:
#   ruby server-images/ruby/test/metrics_test.rb
require "minitest/autorun"
require "tmpdir"
require_relative "../app/reference_app"

class MetricsTest < Minitest::Test
  FakeTiming = Struct.new(:wall, :cpu, :io, :gvl, :pool, :runqueue)

  def parse(text)
    text.lines.reject { |l| l.start_with?("#") }.to_h { |l| k, v = l.split(" ", 2); [k, v.to_f] }
  end

  # A forked worker's counters reach /metrics of another process through its file, and stay
  # counted after that worker has exited (sums never go backwards on worker restarts).
  def test_worker_processes_are_summed_through_their_files
    Dir.mktmpdir do |dir|
      metrics = Reference::Metrics.new(dir: dir, server: "puma", gvl_source: "estimate")
      child = fork do
        metrics.record(200, FakeTiming.new(0.3, 0.1, 0.15, 0.03, 0.0, 0.02))
        metrics.record(500, FakeTiming.new(0.02, 0.01, 0.0, 0.01, 0.0, 0.0))
        metrics.flush
        exit!(0)
      end
      Process.wait(child)
      metrics.record(200, FakeTiming.new(2.0, 0.5, 1.0, 0.3, 0.1, 0.1))

      m = parse(metrics.render)
      assert_equal 2, m['rails_requests_total{status="200"}']
      assert_equal 1, m['rails_requests_total{status="500"}']
      assert_equal 3, m["rails_request_duration_seconds_count"]
      assert_in_delta 2.32, m["rails_request_duration_seconds_sum"], 1e-9
      assert_equal 1, m['rails_request_duration_seconds_bucket{le="0.025"}']
      assert_equal 2, m['rails_request_duration_seconds_bucket{le="0.5"}']
      assert_equal 2, m['rails_request_duration_seconds_bucket{le="1"}']
      assert_equal 3, m['rails_request_duration_seconds_bucket{le="2.5"}']
      assert_equal 3, m['rails_request_duration_seconds_bucket{le="+Inf"}']
      assert_in_delta 0.61, m["ruby_running_seconds_total"], 1e-9
      assert_in_delta 1.15, m["ruby_io_wait_seconds_total"], 1e-9
      assert_in_delta 0.34, m["ruby_gvl_wait_seconds_total"], 1e-9
      assert_in_delta 0.12, m["ruby_cpu_runqueue_wait_seconds_total"], 1e-9
      assert_in_delta 0.1, m["ruby_db_pool_wait_seconds_total"], 1e-9
      assert_equal 2, m["reference_app_worker_processes"]
    end
  end

  FakePuma = Struct.new(:stats)

  # Puma's pool gauges are per live worker; a dead worker's counters stay, its gauges go.
  def test_puma_gauges_are_reported_per_live_worker
    Dir.mktmpdir do |dir|
      metrics = Reference::Metrics.new(dir: dir, server: "puma", gvl_source: "estimate")
      child = fork do
        metrics.attach_server(FakePuma.new({ backlog: 7, running: 5, pool_capacity: 0, max_threads: 5, requests_count: 1 }))
        metrics.record(200, FakeTiming.new(0.1, 0.01, 0.05, 0.0, 0.0, 0.0))
        metrics.flush
        exit!(0)
      end
      Process.wait(child)
      metrics.attach_server(FakePuma.new({ backlog: 2, running: 5, pool_capacity: 1, max_threads: 5, requests_count: 9 }))
      text = metrics.render
      assert_includes text, %(puma_backlog{worker="#{Process.pid}"} 2\n)
      assert_includes text, %(puma_pool_capacity{worker="#{Process.pid}"} 1\n)
      assert_includes text, %(puma_max_threads{worker="#{Process.pid}"} 5\n)
      refute_includes text, %(worker="#{child}"), "the exited worker has no gauges"
      assert_includes text, %(rails_requests_total{status="200"} 1\n), "but its counters remain"
    end
  end

  def test_queue_time_is_summed_over_workers
    Dir.mktmpdir do |dir|
      metrics = Reference::Metrics.new(dir: dir, server: "puma", gvl_source: "estimate")
      child = fork do
        metrics.record_queue_time(0.0)
        metrics.record_queue_time(2.0)
        metrics.flush
        exit!(0)
      end
      Process.wait(child)
      metrics.record_queue_time(0.004)
      m = parse(metrics.render)
      assert_equal 3, m["rails_request_queue_time_seconds_count"]
      assert_in_delta 2.004, m["rails_request_queue_time_seconds_sum"], 1e-9
      assert_equal 1, m['rails_request_queue_time_seconds_bucket{le="0.001"}']
      assert_equal 2, m['rails_request_queue_time_seconds_bucket{le="0.005"}']
      assert_equal 2, m['rails_request_queue_time_seconds_bucket{le="1.5"}']
      assert_equal 3, m['rails_request_queue_time_seconds_bucket{le="2.5"}']
      assert_equal 3, m['rails_request_queue_time_seconds_bucket{le="+Inf"}']
      assert_equal 0, m["rails_request_duration_seconds_count"]
    end
  end

  def test_request_start_header_formats
    parse = ->(v) { Reference::RequestStart.parse(v) }
    assert_in_delta 1_700_000_000.123, parse.call("t=1700000000123"), 1e-6
    assert_in_delta 1_700_000_000.123456, parse.call("t=1700000000123456"), 1e-6
    assert_in_delta 1_700_000_000.123, parse.call("t=1700000000.123"), 1e-6
    assert_in_delta 1_700_000_000.123, parse.call("1700000000123"), 1e-6
    assert_in_delta 1_700_000_000.0, parse.call(" t=1700000000 "), 1e-6
    assert_in_delta 1_700_000_000.1234568, parse.call("t=1700000000123456789"), 1e-6
    ["", "t=", "abc", "t=abc", "t=-1700000000123", "t=5", "t=1.2.3", "t=1e12", "t=0",
     "t=1700000000123ms", nil].each do |bad|
      assert_nil parse.call(bad), bad.inspect
    end
    assert_in_delta 0.4, Reference::RequestStart.queue_time("t=1700000000100", 1_700_000_000.5), 1e-6
    assert_equal 0.0, Reference::RequestStart.queue_time("t=1700000001000", 1_700_000_000.5)
    assert_nil Reference::RequestStart.queue_time("garbage", 1_700_000_000.5)
  end

  # What each router writes (see request_start.rb), and the fallbacks after X-Request-Start.
  def test_router_formats_and_fallbacks
    rs = Reference::RequestStart
    { "t=1700000000.123" => [1_700_000_000.123, false], "t=1700000000123" => [1_700_000_000.123, false],
      "1700000000123" => [1_700_000_000.123, false], "t=1700000000123456" => [1_700_000_000.123456, false],
      "t=1700000000" => [1_700_000_000.0, true],
      "t=1700000000123, t=1700000000200" => [1_700_000_000.123, false] }.each do |v, (secs, coarse)|
      s = rs.parse_stamp(v)
      refute_nil s, v
      assert_in_delta secs, s[0], 1e-6, v
      assert_equal coarse, s[1], v
    end
    alb = "Root=1-6553f100-bd862e3fe1be46a994272793"
    assert_equal [1_700_000_000.0, true], rs.parse_amzn_trace_id(alb)
    assert_equal [1_700_000_000.0, true], rs.parse_amzn_trace_id("Self=1-67891234-1245;Root=1-6553f100-abc")
    ["", "Root=2-6553f100-x", "Root=1-6553f1-x", "Root=1-zzzzzzzz-x", nil].each do |bad|
      assert_nil rs.parse_amzn_trace_id(bad), bad.inspect
    end
    env = { "HTTP_X_AMZN_TRACE_ID" => alb }
    assert_in_delta 0.5, rs.queue_time_from_env(env, 1_700_000_000.5), 1e-6
    env["HTTP_X_QUEUE_START"] = "t=1700000000400"
    assert_in_delta 0.1, rs.queue_time_from_env(env, 1_700_000_000.5), 1e-6
    env["HTTP_X_REQUEST_START"] = "t=1700000000200"
    assert_in_delta 0.3, rs.queue_time_from_env(env, 1_700_000_000.5), 1e-6
    assert_nil rs.queue_time_from_env({}, 1_700_000_000.5)
  end

  # METRICS_NAMES=yabeda: the series the operator's `preset: yabeda` reads — yabeda-rack-queue's
  # histogram with its buckets, yabeda-puma-plugin's gauges by worker index with busy_threads.
  # The async worker's DB pool follows the variables the operator renders for a Falcon
  # candidate (dbPool: DB_POOL and RAILS_MAX_THREADS; without it the baseline's RAILS_MAX_THREADS).
  def test_async_db_pool_reads_the_pool_variables
    pool = ->(env) { Reference::Env.settings(env).db_concurrency }
    assert_equal 10, pool.call({})
    assert_equal 6, pool.call("RAILS_MAX_THREADS" => "6")
    assert_equal 12, pool.call("RAILS_MAX_THREADS" => "12", "DB_POOL" => "12")
    assert_equal 15, pool.call("RAILS_MAX_THREADS" => "6", "DB_POOL" => "15")
    assert_equal 2, pool.call("DB_POOL" => "15", "DB_CONCURRENCY" => "2")
    err = assert_raises(Reference::ConfigError) { pool.call("DB_POOL" => "0") }
    assert_includes err.message, "DB_POOL"
  end

  def test_yabeda_names
    metrics = Reference::Metrics.new(dir: nil, server: "puma", gvl_source: "estimate", names: "yabeda")
    metrics.attach_server(FakePuma.new({ backlog: 3, running: 4, pool_capacity: 0, max_threads: 4 }))
    metrics.record(200, FakeTiming.new(0.1, 0.01, 0.05, 0.0, 0.0, 0.0))
    metrics.record_queue_time(0.003)
    text = metrics.render
    m = parse(text)
    assert_includes text, "# TYPE rack_queue_duration_seconds histogram\n"
    refute_includes text, "rails_request_queue_time_seconds"
    assert_equal 0, m['rack_queue_duration_seconds_bucket{le="0.001"}']
    assert_equal 1, m['rack_queue_duration_seconds_bucket{le="0.005"}']
    assert_equal 1, m['rack_queue_duration_seconds_bucket{le="60"}']
    assert_equal 1, m['rails_requests_total{status="200"}']
    assert_equal 3, m['puma_backlog{index="0"}']
    assert_equal 4, m['puma_max_threads{index="0"}']
    assert_equal 0, m['puma_pool_capacity{index="0"}']
    # Puma 5 has no busy_threads stat: max − pool capacity + backlog, as Puma 6 counts it.
    assert_equal 7, m['puma_busy_threads{index="0"}']
    refute_includes text, "worker="
    assert_raises(ArgumentError) { Reference::Metrics.new(dir: nil, server: "puma", gvl_source: "estimate", names: "statsd") }
  end

  def test_single_process_without_a_directory_keeps_counters_in_memory
    metrics = Reference::Metrics.new(dir: nil, server: "falcon", gvl_source: "estimate")
    metrics.record(404, FakeTiming.new(0.001, 0.001, 0.0, 0.0, 0.0, 0.0))
    text = metrics.render
    assert_includes text, %(rails_requests_total{status="404"} 1\n)
    assert_match(/^ruby_gvl_metrics_info\{server="falcon",gvl_source="estimate",runqueue_source="(schedstat|none)",ruby_version="#{RUBY_VERSION}"\} 1$/, text)
    assert_includes text, "# TYPE rails_request_duration_seconds histogram"
    refute_includes text, "puma_backlog", "no Puma gauges without a Puma server"
  end

  # io wait counts the nominal dependency time; CPU burnt between waits is running time; the
  # kernel's run-queue wait is its own part; what is left of the wall time is the GVL estimate.
  def test_timing_splits_wall_time_into_running_io_and_the_rest
    timing = Reference::Timing.new(:estimate)
    timing.io_wait(0.05) { sleep 0.05 }
    deadline = Reference::Timing.thread_cpu + 0.03
    nil while Reference::Timing.thread_cpu < deadline
    timing.io_wait(0.02) { sleep 0.02 }
    timing.finish
    assert_in_delta 0.07, timing.io, 1e-12
    assert_operator timing.cpu, :>=, 0.03
    assert_operator timing.wall, :>=, 0.1
    assert_operator timing.runqueue, :>=, 0.0
    assert_in_delta [timing.wall - timing.cpu - timing.io - timing.runqueue, 0.0].max, timing.gvl, 1e-9
  end

  # An io wait that is cut short (a failing dependency) counts only the time actually waited.
  def test_io_wait_is_capped_at_the_measured_time
    timing = Reference::Timing.new(:estimate)
    timing.io_wait(5.0) { sleep 0.01 }
    timing.finish
    assert_operator timing.io, :<, 1.0
    assert_operator timing.io, :>=, 0.01
  end
end

class RunQueueTest < Minitest::Test
  # The kernel's per-thread counter moves when the thread competes for a CPU; here only check
  # that it is read as a non-decreasing number of seconds where Linux provides it.
  def test_reads_the_threads_run_queue_wait
    skip "no /proc/thread-self/schedstat on this kernel" unless Reference::RunQueue.available?

    first = Reference::RunQueue.seconds
    x = 0
    200_000.times { |i| x += i }
    assert_operator Reference::RunQueue.seconds, :>=, first
    assert_equal 1.5, Reference::RunQueue.seconds_from("100 1500000000 7\n")
    assert_nil Reference::RunQueue.seconds_from("garbage")
  end
end
