# frozen_string_literal: true

module ConcurrencyMetrics
  # How late a fiber server's event loop (Falcon's reactor) runs a timer: a fiber that sleeps
  # PERIOD again and again and adds how much later than due it woke, and the time covered. A
  # call that blocks without yielding — a shell-out, a C extension that keeps the GVL, a sync
  # read of a large file — stalls every fiber of that worker; mean latency at low load hardly
  # shows it, the late share does. Started by the middleware on the first request a scheduler
  # runs, one per reactor (thread) and process; started again if something stopped it.
  module EventLoopProbe
    PERIOD = 0.02
    KEY = :concurrency_metrics_event_loop_probe

    module_function

    def ensure_running(state)
      return unless Fiber.respond_to?(:scheduler) && Fiber.scheduler

      running = Thread.current[KEY]
      return if running && running[0] == Process.pid && running[1].alive?

      fiber = Fiber.schedule { run(state) }
      Thread.current[KEY] = [Process.pid, fiber]
    end

    def run(state)
      loop do
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        sleep PERIOD
        covered = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
        state.add(:event_loop_lag, [covered - PERIOD, 0.0].max)
        state.add(:event_loop_probe, covered)
      end
    end
  end
end
