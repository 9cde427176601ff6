# frozen_string_literal: true

require_relative "run_queue"
require_relative "gvl"

module ConcurrencyMetrics
  # Splits one request's wall time, measured on the request's own thread:
  #
  # running:  thread CPU time (CLOCK_THREAD_CPUTIME_ID) over the request — the time the thread
  #           executed, which for Ruby code is time holding the GVL. (The reference app's
  #           method; CPU a client library spends inside a wrapped call counts here too.)
  # runqueue: kernel run-queue wait of the thread (schedstat), over the request; read only when
  #           enabled (by default in estimate mode, which needs it; each read is a syscall).
  # With the hook (:hook):
  #   gvl:    the thread's READY -> RESUMED time (wanted the GVL, did not have it);
  #   io:     the thread's SUSPENDED -> READY time (released the GVL to block: I/O, sleep,
  #           waiting on a lock or a connection pool).
  # Without it (:estimate, the reference app's documented estimate):
  #   io:     the wall time of each wrapped wait (io_wait / the instrumented libraries) minus the
  #           CPU and the run-queue wait the thread had inside it, capped at a nominal duration
  #           when the caller knows one;
  #   gvl:    wall − running − io − runqueue, clamped at 0: the time the request was ready but not
  #           running for Ruby's reasons — preemption by other threads during CPU work, and the
  #           GVL re-acquired after a wait (which the estimate cannot tell from the wait itself:
  #           it lands in io). It also absorbs any wait the gem does not see (an unwrapped
  #           socket read), so it is an estimate and labelled so.
  class Timing
    attr_reader :mode

    def self.now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def self.thread_cpu
      Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    end

    # mode: :hook or :estimate (see Gvl.resolve); runqueue: read the kernel's run-queue wait.
    def initialize(mode, runqueue: mode == :estimate)
      @mode = mode
      @runqueue = runqueue
      @io = 0.0
      @depth = 0
      @wall_start = Timing.now
      @cpu_start = Timing.thread_cpu
      @runqueue_start = runqueue_now
      @gvl_start, @idle_start = Gvl.thread_times if mode == :hook
    end

    # Counts the block as I/O wait (estimate mode); nested waits count once. nominal: what
    # the dependency itself took, when known (e.g. a server-reported time), caps the figure.
    def io_wait(nominal = nil)
      return yield if @mode == :hook

      token = io_begin
      begin
        yield
      ensure
        io_end(token, nominal)
      end
    end

    # The two halves of io_wait, for instrumentation that sees start and finish separately.
    def io_begin
      @depth += 1
      return nil if @depth > 1

      [Timing.now, Timing.thread_cpu, runqueue_now]
    end

    def io_end(token, nominal = nil)
      @depth -= 1 if @depth.positive?
      return if token.nil?

      wall0, cpu0, rq0 = token
      waited = (Timing.now - wall0) - (Timing.thread_cpu - cpu0) - (runqueue_now - rq0)
      waited = 0.0 if waited.negative?
      waited = nominal if nominal && nominal < waited
      @io += waited
    end

    def finish
      wall = Timing.now - @wall_start
      running = Timing.thread_cpu - @cpu_start
      runqueue = runqueue_now - @runqueue_start
      if @mode == :hook
        gvl, idle = Gvl.thread_times
        gvl -= @gvl_start
        io = idle - @idle_start
      else
        io = @io
        gvl = wall - running - io - runqueue
        gvl = 0.0 if gvl.negative?
      end
      Sample.new(running: running, io_wait: io, gvl_wait: gvl, runqueue_wait: runqueue, wall: wall)
    end

    private

    def runqueue_now
      @runqueue ? RunQueue.seconds : 0.0
    end
  end
end
