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

    # The label for a server: measured only for one request per thread (Puma) with gvltools.
    def label_for(server)
      server == "puma" && measured? ? "gvltools" : "estimate"
    end

    # Thread GVL wait in seconds; only meaningful when measured? is true.
    def thread_wait
      GVLTools::LocalTimer.monotonic_time / 1e9
    end
  end

  # Per-thread "runnable but not running" time from the kernel: the second field of
  # /proc/thread-self/schedstat (ns spent waiting on a run queue). On a host with more runnable
  # threads than cores this is large, and without it the GVL-wait estimate would blame the GVL
  # for the kernel's scheduling. nil where the file does not exist (non-Linux).
  module RunQueue
    PATH = "/proc/thread-self/schedstat"

    module_function

    def available?
      return @available if defined?(@available)

      @available = File.readable?(PATH) && !seconds_from(File.read(PATH)).nil?
    end

    # One open file per thread (and per process, since a forked child must not read its
    # parent's thread); pread at offset 0 makes the kernel regenerate the numbers (~2 us).
    def seconds
      return 0.0 unless available?

      holder = Thread.current.thread_variable_get(:reference_schedstat)
      if holder.nil? || holder[0] != Process.pid
        holder = [Process.pid, File.open(PATH)]
        Thread.current.thread_variable_set(:reference_schedstat, holder)
      end
      seconds_from(holder[1].pread(128, 0)) || 0.0
    end

    def seconds_from(text)
      ns = Integer(text.to_s.split(" ", 3)[1].to_s, 10, exception: false)
      ns && ns / 1e9
    end
  end

  # Splits one request's wall time into running (holding the GVL), I/O wait, DB pool wait,
  # kernel run-queue wait, and waiting to run again (GVL or, under the fiber scheduler, the
  # event loop).
  #
  # running: thread CPU time (CLOCK_THREAD_CPUTIME_ID) summed over the stretches in which this
  #   request executes, i.e. everything except its own waits. Under the fiber scheduler the
  #   thread also runs other requests' fibers while this one waits; those stretches are excluded
  #   because accounting pauses at each wait and restarts when the fiber resumes.
  # io: the nominal duration of each simulated dependency call (what the dependency takes),
  #   capped at the measured wall time of the call.
  # pool: time spent waiting for a DB slot (Async::Semaphore), fiber mode only.
  # runqueue: kernel run-queue wait of the request's thread — over the whole request for a
  #   thread per request (Puma), over the request's own stretches for fibers.
  # gvl (estimate): wall - running - io - pool - runqueue. It is the time the request was ready
  #   but not running for Ruby's reasons: after a wait ended until the thread got the GVL back
  #   (or the fiber was resumed), and preemption by other Ruby threads during CPU work. It also
  #   absorbs timer slack (tens of microseconds per wait) and the HTTP client's own CPU inside a
  #   call (~0.3 ms per Net::HTTP call), so it is an estimate.
  class Timing
    attr_reader :cpu, :io, :pool, :runqueue, :wall, :gvl

    # gvl: :measured (gvltools) or :estimate; fibers: true when requests share a thread.
    def initialize(gvl, fibers: false)
      @fibers = fibers
      @cpu = 0.0
      @io = 0.0
      @pool = 0.0
      @runqueue = 0.0
      @wall_start = self.class.now
      @gvl_start = gvl == :measured ? GvlSource.thread_wait : nil
      @segment_start = self.class.thread_cpu
      @runqueue_start = RunQueue.seconds
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
      close_segment
      @runqueue = RunQueue.seconds - @runqueue_start unless @fibers
      @wall = self.class.now - @wall_start
      @gvl = if @gvl_start
               GvlSource.thread_wait - @gvl_start
             else
               [@wall - @cpu - @io - @pool - @runqueue, 0.0].max
             end
      self
    end

    private

    def close_segment
      @cpu += self.class.thread_cpu - @segment_start
      @runqueue += RunQueue.seconds - @runqueue_start if @fibers
    end

    def open_segment
      @segment_start = self.class.thread_cpu
      @runqueue_start = RunQueue.seconds if @fibers
    end

    def pause
      close_segment
      started = self.class.now
      yield
      self.class.now - started
    ensure
      open_segment
    end
  end
end
