# frozen_string_literal: true

begin
  # Ruby >= 3.2 exposes GVL events through the C instrumentation API
  # (rb_internal_thread_add_event_hook); the gvltools gem turns them into per-thread timers.
  # Debian's Ruby 3.1 has neither, so this is optional.
  require "gvltools"
rescue LoadError
  nil
end

module Reference
  # Where ruby_gvl_wait_seconds_total comes from in this process.
  module GvlSource
    module_function

    def measured?
      return @measured if defined?(@measured)

      @measured = defined?(GVLTools::LocalTimer) && GVLTools::LocalTimer.respond_to?(:enable) ? true : false
      GVLTools::LocalTimer.enable if @measured
      @measured
    end

    # Thread GVL wait in seconds; only meaningful when measured? is true.
    def thread_wait
      GVLTools::LocalTimer.monotonic_time / 1e9
    end
  end

  # Splits one request's wall time into running (holding the GVL), I/O wait, DB pool wait
  # and waiting to run again (GVL or, under the fiber scheduler, the event loop).
  #
  # running: thread CPU time (CLOCK_THREAD_CPUTIME_ID) summed over the stretches in which this
  #   request executes, i.e. everything except its own waits. Under the fiber scheduler the
  #   thread also runs other requests' fibers while this one waits; those stretches are excluded
  #   because accounting pauses at each wait and restarts when the fiber resumes.
  # io: the nominal duration of each simulated dependency call (what the dependency takes),
  #   capped at the measured wall time of the call.
  # pool: time spent waiting for a DB slot (Async::Semaphore), fiber mode only.
  # gvl (estimate): wall - running - io - pool. It is the time the request was ready but not
  #   running: after a wait ended until the thread got the GVL back (or the fiber was resumed),
  #   and preemption during CPU work. It also absorbs timer slack (tens of microseconds per
  #   wait) and the HTTP client's own CPU inside a call (~0.1 ms), so it is an estimate.
  class Timing
    attr_reader :cpu, :io, :pool

    def initialize(mode)
      @mode = mode
      @cpu = 0.0
      @io = 0.0
      @pool = 0.0
      @wall_start = self.class.now
      @gvl_start = mode == :measured ? GvlSource.thread_wait : nil
      @segment_start = self.class.thread_cpu
    end

    def self.now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def self.thread_cpu
      Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    end

    # Runs a dependency call that takes `nominal` seconds.
    def io_wait(nominal)
      waited = pause { yield }
      @io += [nominal, waited].min
    end

    def pool_wait(&block)
      @pool += pause(&block)
    end

    def finish
      @cpu += self.class.thread_cpu - @segment_start
      @segment_start = self.class.thread_cpu
      @wall = self.class.now - @wall_start
      @gvl = if @gvl_start
               GvlSource.thread_wait - @gvl_start
             else
               [@wall - @cpu - @io - @pool, 0.0].max
             end
      self
    end

    attr_reader :wall, :gvl

    private

    def pause
      @cpu += self.class.thread_cpu - @segment_start
      started = self.class.now
      yield
      self.class.now - started
    ensure
      @segment_start = self.class.thread_cpu
    end
  end
end
