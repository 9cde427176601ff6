# frozen_string_literal: true

require_relative "test_helper"
require "net/http"
require "socket"

# The per-request split, through the middleware, in this Ruby's mode (the hook on >= 3.2, the
# estimate before). Bounds are one-sided or loose: a busy 2-core machine stretches wall time.
class MiddlewareTest < Minitest::Test
  def setup
    @recorder = Recorder.new
    ConcurrencyMetrics.configure { |c| c.backend = @recorder }
  end

  def teardown
    ConcurrencyMetrics.reset!
  end

  def app(&block)
    ConcurrencyMetrics::Middleware.new(lambda do |env|
      block.call(env)
      [200, { "content-type" => "text/plain" }, ["ok"]]
    end)
  end

  def get(mw, path = "/")
    mw.call("PATH_INFO" => path, "REQUEST_METHOD" => "GET")
  end

  def test_a_50ms_wait_is_io_wait
    # Wrapped as an app wraps a wait the gem cannot see; with the hook the wrapper is a no-op
    # and the hook measures the sleep itself.
    get(app { ConcurrencyMetrics.io_wait { sleep 0.05 } })
    s = only_sample
    # The kernel's run-queue wait after the wake-up is its own figure (estimate mode).
    assert_operator s.io_wait + s.runqueue_wait, :>=, 0.045
    assert_operator s.io_wait, :<=, s.wall
    assert_operator s.gvl_wait, :<, 0.03
    assert_operator s.running, :<, 0.02
    assert_operator s.wall, :>=, 0.05
  end

  def test_an_unwrapped_sleep_is_io_with_the_hook_and_gvl_estimate_without
    get(app { sleep 0.05 })
    s = only_sample
    if Work.hook?
      assert_operator s.io_wait, :>=, 0.045
      assert_operator s.gvl_wait, :<, 0.03
    else
      # The documented limitation of the estimate: a wait the gem does not see lands in it.
      assert_equal 0.0, s.io_wait
      assert_operator s.gvl_wait, :>=, 0.045
    end
  end

  def test_a_cpu_loop_is_running_time
    get(app { Work.cpu(0.05) })
    s = only_sample
    assert_operator s.running, :>=, 0.05
    assert_operator s.io_wait, :<, 0.02
  end

  def test_net_http_is_io_wait_without_wrapping
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    responder = Thread.new do
      client = server.accept
      client.gets("\r\n\r\n")
      sleep 0.1 # the dependency's latency
      client.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
      client.close
    end
    get(app { Net::HTTP.get(URI("http://127.0.0.1:#{port}/")) })
    responder.join
    s = only_sample
    assert_operator s.io_wait + s.runqueue_wait, :>=, 0.09
    assert_operator s.io_wait, :<=, s.wall
  ensure
    server&.close
  end

  def test_gvl_contention_shows_as_gvl_wait
    # All three requests start (waiting for each other off the GVL, as I/O), then each burns
    # more CPU than Ruby's 100 ms time slice, so the GVL changes hands inside the requests.
    started = 0
    lock = Mutex.new
    all_in = ConditionVariable.new
    mw = app do
      ConcurrencyMetrics.io_wait do
        lock.synchronize do
          started += 1
          all_in.broadcast if started == 3
          all_in.wait(lock) while started < 3
        end
      end
      Work.cpu(0.12)
    end
    Array.new(3) { Thread.new { get(mw) } }.each(&:join)
    samples = @recorder.samples
    assert_equal 3, samples.size
    cpu = samples.sum(&:running)
    gvl = samples.sum(&:gvl_wait)
    # One GVL, three CPU-bound requests: together they wait at least a third of their CPU.
    assert_operator gvl, :>, cpu / 3.0, "gvl #{gvl} cpu #{cpu}"
  end

  def test_ignored_paths_and_nested_middleware_are_not_counted
    inner = app { nil }
    outer = ConcurrencyMetrics::Middleware.new(inner)
    get(outer, "/metrics")
    get(outer, "/healthz")
    assert_empty @recorder.samples
    get(outer, "/orders")
    assert_equal 1, @recorder.samples.size, "measured once through two copies of the middleware"
  end

  def test_an_exception_in_the_app_is_still_recorded_and_raised
    assert_raises(RuntimeError) { get(app { raise "boom" }) }
    assert_equal 1, @recorder.samples.size
  end

  def test_a_failing_backend_never_fails_the_request
    errors = []
    broken = Object.new
    def broken.setup(_info) = nil
    def broken.record(_sample) = raise(IOError, "collector down")
    ConcurrencyMetrics.configure do |c|
      c.backend = [broken, @recorder]
      c.on_error = ->(e) { errors << e }
    end
    status, = get(app { nil })
    assert_equal 200, status
    assert_equal ["collector down"], errors.map(&:message)
    assert_equal 1, @recorder.samples.size, "the other backend still got the request"
  end

  def test_info_names_the_source_and_rate
    assert_equal({ gvl_source: Work.hook? ? "hook" : "estimate", runqueue_source: Work.runqueue_source, sample_rate: "1", ruby_version: RUBY_VERSION },
                 @recorder.info)
  end

  def test_the_run_queue_is_read_only_when_asked
    skip "no /proc/thread-self/schedstat here" unless ConcurrencyMetrics::RunQueue.available?

    { true => "schedstat", false => "none" }.each do |flag, source|
      recorder = Recorder.new
      ConcurrencyMetrics.configure do |c|
        c.backend = recorder
        c.gvl = :estimate
        c.runqueue = flag
      end
      # Whether the kernel made the thread wait is up to the machine's load: only "off" is
      # asserted exactly.
      get(app { Work.cpu(0.02) })
      assert_equal source, recorder.info[:runqueue_source]
      assert_equal 0.0, recorder.samples.first.runqueue_wait unless flag
    end
    assert_match(/runqueue must be :auto, true or false/,
                 assert_raises(ConcurrencyMetrics::ConfigError) { ConcurrencyMetrics::Config.new.runqueue = :yes }.message)
  end

  def test_unconfigured_passes_through
    ConcurrencyMetrics.reset!
    status, = get(app { nil })
    assert_equal 200, status
    assert_empty @recorder.samples
  end

  def test_active_record_queries_are_io_wait_in_estimate_mode
    begin
      require "active_support"
      require "active_support/notifications"
    rescue LoadError
      skip "ActiveSupport not installed"
    end
    ConcurrencyMetrics.configure do |c|
      c.backend = @recorder
      c.gvl = :estimate
    end
    get(app { ActiveSupport::Notifications.instrument("sql.active_record", sql: "SELECT 1") { sleep 0.05 } })
    s = only_sample
    assert_operator s.io_wait + s.runqueue_wait, :>=, 0.045
    assert_operator s.gvl_wait, :<, 0.04
  end

  private

  def only_sample
    assert_equal 1, @recorder.samples.size
    @recorder.samples.first
  end
end
