# frozen_string_literal: true

require "socket"

module Shop
  module Metrics
    # GET /metrics on METRICS_PORT from bin/serve's own process (yabeda-puma-plugin's
    # `plugin :yabeda_prometheus` serves it from Puma's master on 9394 for the same reason): a
    # saturated Puma answers /metrics on the app port only when a thread frees up — a scrape
    # times out exactly when the numbers matter — while this answers at once from the workers'
    # files (at most FLUSH_INTERVAL old). Plain sockets: scrapes are rare.
    class Listener
      def initialize(store, host:, port:)
        @store = store
        @server = TCPServer.new(host, port)
      end

      def start
        Thread.new do
          loop do
            client = @server.accept
            Thread.new(client) { |c| answer(c) }
          end
        rescue IOError
          nil # closed at shutdown
        end
        self
      end

      private

      def answer(client)
        line = read_head(client)
        return if line.nil?

        method, path, = line.split(" ", 3)
        status, body =
          if method == "GET" && path.to_s.split("?", 2).first == "/metrics"
            [200, @store.render]
          else
            [404, "not found\n"]
          end
        client.write("HTTP/1.1 #{status} #{status == 200 ? 'OK' : 'Not Found'}\r\n" \
                     "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n" \
                     "Content-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
      rescue SystemCallError, IOError
        nil
      ensure
        client.close
      end

      # The request line once the headers are in, bounded in time (5 s) and size (16 KiB).
      def read_head(client)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
        head = +""
        until head.include?("\r\n\r\n") || head.include?("\n\n")
          return nil if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline || head.bytesize > 16_384
          return nil unless client.wait_readable(1)

          chunk = client.read_nonblock(4096, exception: false)
          return nil if chunk.nil?
          next if chunk == :wait_readable

          head << chunk
        end
        head[/\A[^\r\n]*/]
      end
    end
  end
end
