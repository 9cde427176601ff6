# frozen_string_literal: true

module ConcurrencyMetrics
  # Per-thread "runnable but not running" time from the kernel: the second field of
  # /proc/thread-self/schedstat (ns waiting on a run queue). On a host with more runnable threads
  # than cores this is large, and without it the GVL-wait estimate would blame the GVL for the
  # kernel's scheduling. 0.0 where the file does not exist (non-Linux, chroot without /proc).
  # The same method as server-images/ruby/app/timing.rb.
  module RunQueue
    PATH = "/proc/thread-self/schedstat"

    module_function

    def available?
      return @available if defined?(@available)

      @available = File.readable?(PATH) && !seconds_from(File.read(PATH)).nil?
    end

    # One open file per thread and process (a forked child must not read its parent's
    # thread); pread at offset 0 makes the kernel regenerate the numbers (~2 us).
    def seconds
      return 0.0 unless available?

      holder = Thread.current.thread_variable_get(:concurrency_metrics_schedstat)
      if holder.nil? || holder[0] != Process.pid
        holder = [Process.pid, File.open(PATH)]
        Thread.current.thread_variable_set(:concurrency_metrics_schedstat, holder)
      end
      seconds_from(holder[1].pread(128, 0)) || 0.0
    end

    def seconds_from(text)
      ns = Integer(text.to_s.split(" ", 3)[1].to_s, 10, exception: false)
      ns && ns / 1e9
    end
  end
end
