# frozen_string_literal: true

module ConcurrencyMetrics
  # Rack middleware: measures a sampled share of requests on their own thread and records
  # their running / I/O-wait / GVL-wait split. Put it first (outermost) so the whole stack is
  # measured; the Railtie does that for Rails.
  class Middleware
    def initialize(app)
      @app = app
    end

    def call(env)
      state = ConcurrencyMetrics.state
      EventLoopProbe.ensure_running(state) if state&.totals&.include?(:event_loop_lag)
      # Not configured, not measured, or already measured by an outer copy of this middleware.
      return @app.call(env) if state.nil? || Thread.current[TIMING_KEY] ||
                               state.config.ignored?(env["PATH_INFO"]) || !state.config.sample?

      timing = Timing.new(state.gvl_mode, runqueue: state.runqueue)
      Thread.current[TIMING_KEY] = timing
      begin
        @app.call(env)
      ensure
        Thread.current[TIMING_KEY] = nil
        state.record(timing.finish)
      end
    end
  end
end
