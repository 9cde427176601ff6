# frozen_string_literal: true

module ConcurrencyMetrics
  # Where this process's GVL-wait figure comes from.
  #   :hook      — the C extension's GVL event hook (Ruby >= 3.2, CRuby, 1:1 threads): GVL wait
  #                and off-GVL wait measured per thread.
  #   :estimate  — Ruby < 3.2 (or the extension not built, or M:N threads): GVL wait is
  #                wall − running − I/O wait − run-queue wait, with I/O measured around the calls
  #                the gem knows (see Instrumentation) and ConcurrencyMetrics.io_wait blocks.
  module Gvl
    module_function

    def native_loaded?
      return @native_loaded if defined?(@native_loaded)

      @native_loaded = begin
        require "concurrency_metrics/native"
        true
      rescue LoadError
        false
      end
    end

    # Why the hook cannot be used here, or nil when it can.
    def hook_unavailable_reason
      return "the C extension concurrency_metrics/native is not built" unless native_loaded?
      return "Ruby #{RUBY_VERSION} has no GVL instrumentation API (needs >= 3.2)" unless Native.hook_available?
      # The hook keeps its timers per native thread; M:N threads share native threads.
      return "RUBY_MN_THREADS=1 (M:N threads share native threads)" if ENV["RUBY_MN_THREADS"] == "1"

      nil
    end

    # requested: :auto (the hook when available) or :estimate.
    def resolve(requested)
      case requested
      when :estimate then :estimate
      when :auto then hook_unavailable_reason ? :estimate : :hook
      when :hook
        reason = hook_unavailable_reason
        raise ConfigError, "gvl: :hook is not possible here: #{reason}" if reason

        :hook
      else
        raise ConfigError, "gvl must be :auto, :hook or :estimate, got #{requested.inspect}"
      end
    end

    def enable_hook
      Native.enable
    end

    # [gvl_wait_seconds, off_gvl_seconds] of the calling thread since it started.
    def thread_times
      gvl_ns, idle_ns = Native.thread_times
      [gvl_ns / 1e9, idle_ns / 1e9]
    end
  end
end
