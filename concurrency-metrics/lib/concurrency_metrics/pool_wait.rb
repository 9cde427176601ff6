# frozen_string_literal: true

module ConcurrencyMetrics
  # ActiveRecord checks a connection out without waiting while one is free; only when none is
  # does it call ConnectionPool::Queue#wait_poll (Rails 6.1 to 8), which sleeps on the pool's
  # condition variable until a connection is checked in or checkout_timeout passes. That sleep
  # is the pool wait — a timeout's too. Every wait is counted (not sampled): it is rare and
  # cheap to time, and the operator divides it by all request time. The thread sleeps off the
  # GVL, so in estimate mode it is I/O wait, not GVL wait.
  module PoolWait
    module_function

    def available?
      defined?(::ActiveRecord::ConnectionAdapters::ConnectionPool::Queue) &&
        ::ActiveRecord::ConnectionAdapters::ConnectionPool::Queue.private_method_defined?(:wait_poll)
    end

    # Idempotent; false when this ActiveRecord has no Queue#wait_poll to time.
    def install
      return false unless available?

      queue = ::ActiveRecord::ConnectionAdapters::ConnectionPool::Queue
      queue.prepend(Hook) unless queue.ancestors.include?(Hook)
      true
    end

    module Hook
      private

      def wait_poll(timeout)
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        ::ConcurrencyMetrics.io_wait { super }
      ensure
        ::ConcurrencyMetrics.pool_waited(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
      end
    end
  end
end
