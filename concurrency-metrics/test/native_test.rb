# frozen_string_literal: true

require_relative "test_helper"

# The C extension builds on every Ruby; the hook only where the API exists.
class NativeTest < Minitest::Test
  def setup
    assert ConcurrencyMetrics::Gvl.native_loaded?, "concurrency_metrics/native did not load"
  end

  def test_builds_and_reports_the_hook_by_ruby_version
    expected = RUBY_ENGINE == "ruby" && Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2")
    assert_equal expected, ConcurrencyMetrics::Native.hook_available?
    return if expected

    assert_raises(NotImplementedError) { ConcurrencyMetrics::Native.enable }
    assert_equal "estimate", ConcurrencyMetrics::Gvl.resolve(:auto).to_s
    err = assert_raises(ConcurrencyMetrics::ConfigError) { ConcurrencyMetrics::Gvl.resolve(:hook) }
    assert_match(/no GVL instrumentation API/, err.message)
  end

  def test_hook_times_blocking_and_gvl_wait_per_thread
    skip "Ruby #{RUBY_VERSION}: no GVL instrumentation API" unless ConcurrencyMetrics::Native.hook_available?

    ConcurrencyMetrics::Native.enable
    idle = Thread.new do
      _, idle0 = ConcurrencyMetrics::Gvl.thread_times
      sleep 0.05
      ConcurrencyMetrics::Gvl.thread_times[1] - idle0
    end.value
    assert_operator idle, :>=, 0.045

    # Three CPU-bound threads on one GVL, started together, each burning more than Ruby's
    # 100 ms time slice: each waits for the others' slices.
    started = 0
    lock = Mutex.new
    all_in = ConditionVariable.new
    waits = Array.new(3) do
      Thread.new do
        lock.synchronize do
          started += 1
          all_in.broadcast if started == 3
          all_in.wait(lock) while started < 3
        end
        gvl0, = ConcurrencyMetrics::Gvl.thread_times
        Work.cpu(0.12)
        ConcurrencyMetrics::Gvl.thread_times[0] - gvl0
      end
    end.map(&:value)
    assert_operator waits.sum, :>, 0.12, "GVL waits #{waits.inspect}"
  end
end
