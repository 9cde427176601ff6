# frozen_string_literal: true

require_relative "test_helper"

# The event-loop probe under a real fiber scheduler (Debian's async): started by the first
# request a scheduler runs, on time while fibers yield, late by about as long as a call blocks
# without yielding; nothing under a thread server.
class EventLoopTest < Minitest::Test
  class Totals < Recorder
    attr_reader :fields

    def setup_totals(fields)
      @fields = fields
    end

    def add(field, seconds)
      (@adds ||= Hash.new(0.0))[field] += seconds
    end

    def adds
      (@adds || {}).dup
    end
  end

  def setup
    @totals = Totals.new
    ConcurrencyMetrics.configure do |c|
      c.backend = @totals
      c.event_loop = true
    end
    @mw = ConcurrencyMetrics::Middleware.new(->(_env) { [200, {}, ["ok"]] })
  end

  def teardown
    ConcurrencyMetrics.reset!
    Thread.current[ConcurrencyMetrics::EventLoopProbe::KEY] = nil
  end

  def request
    @mw.call("PATH_INFO" => "/", "REQUEST_METHOD" => "GET")
  end

  def test_a_blocking_call_shows_as_lag_and_yielding_waits_do_not
    begin
      require "async"
      require "fiddle"
    rescue LoadError
      skip "async not installed (Debian: ruby-async)"
    end
    usleep = Fiddle::Function.new(Fiddle.dlopen(nil)["usleep"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT)
    marks = []
    Async do |task|
      request
      request # one probe per reactor, not one per request
      sleep 0.3 # yields: the probe runs on time
      marks << @totals.adds
      usleep.call(200_000) # blocks the reactor
      sleep 0.1
      marks << @totals.adds
      task.stop
    end
    assert_equal %i[event_loop_lag event_loop_probe], @totals.fields
    quiet, blocked = marks
    assert_operator quiet[:event_loop_probe], :>=, 0.2
    assert_operator quiet[:event_loop_lag] / quiet[:event_loop_probe], :<, 0.5
    late = blocked[:event_loop_lag] - quiet[:event_loop_lag]
    assert_operator late, :>=, 0.15, "200 ms blocked, #{late} s late"
  end

  def test_a_thread_server_runs_no_probe
    request
    assert_nil Thread.current[ConcurrencyMetrics::EventLoopProbe::KEY]
    assert_empty @totals.adds
  end
end
