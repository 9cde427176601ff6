# frozen_string_literal: true

module ConcurrencyMetrics
  # Estimate mode only (Ruby < 3.2): the waits the gem can see without the GVL hook. Each call
  # made inside a measured request counts as I/O wait (its wall time minus the CPU and run-queue
  # time the thread had inside it). Waits it does not see land in the GVL estimate; wrap them in
  # ConcurrencyMetrics.io_wait.
  module Instrumentation
    # ActiveSupport::Notifications listener with #start/#finish (an "evented" subscriber, as
    # ActiveSupport calls them): both run on the thread that ran the query.
    class SqlListener
      KEY = :concurrency_metrics_sql

      def start(_name, _id, _payload)
        timing = ConcurrencyMetrics.current_timing
        return unless timing

        (Thread.current[KEY] ||= []) << [timing, timing.io_begin]
      end

      def finish(_name, _id, _payload)
        stack = Thread.current[KEY]
        entry = stack&.pop
        return unless entry

        timing, token = entry
        timing.io_end(token)
      end
    end

    # Net::HTTP#request: connect, write, wait for and read the response. Nested calls
    # (request calls itself when the connection is not started) count once.
    module NetHTTP
      def request(req, body = nil, &block)
        timing = ConcurrencyMetrics.current_timing
        return super unless timing

        timing.io_wait { super }
      end
    end

    @installed = []

    class << self
      attr_reader :installed

      def install(list)
        list.each do |what|
          next if @installed.include?(what)

          case what
          when :active_record
            next unless defined?(ActiveSupport::Notifications)

            ActiveSupport::Notifications.subscribe("sql.active_record", SqlListener.new)
          when :net_http
            require "net/http"
            Net::HTTP.prepend(NetHTTP)
          end
          @installed << what
        end
      end
    end
  end
end
