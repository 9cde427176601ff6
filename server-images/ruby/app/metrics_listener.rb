# frozen_string_literal: true

require "socket"
require_relative "timing"
require_relative "metrics"

module Reference
  # A /metrics endpoint outside the app server, in bin/serve's own process (METRICS_PORT), fed
  # by the workers' metric files. A saturated Puma serves /metrics on its app port only when a
  # thread frees up (7.5 s at 1000 connections on pattern B), long enough for a Prometheus
  # scrape to time out exactly when the numbers matter; this listener answers at once, with
  # numbers at most Metrics::FLUSH_INTERVAL old. Plain stdlib sockets: scrapes are rare.
  class MetricsListener
    def initialize(metrics, host:, port:)
      @metrics = metrics
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

    def close
      @server.close
    end

    private

    def answer(client)
      request_line = read_head(client)
      return if request_line.nil?

      method, path, = request_line.split(" ", 3)
      status, body =
        if method == "GET" && path.to_s.split("?", 2).first == "/metrics"
          [200, @metrics.render]
        else
          [404, "not found\n"]
        end
      client.write("HTTP/1.1 #{status} #{status == 200 ? 'OK' : 'Not Found'}\r\n" \
                   "Content-Type: text/plain; version=0.0.4\r\nContent-Length: #{body.bytesize}\r\n" \
                   "Connection: close\r\n\r\n#{body}")
    rescue SystemCallError, IOError
      nil
    ensure
      client.close
    end

    # The request line, after reading the headers (bounded in time and size).
    def read_head(client)
      first = nil
      deadline = Timing.now + 5
      head = +""
      until head.include?("\r\n\r\n") || head.include?("\n\n")
        return nil if Timing.now > deadline || head.bytesize > 16_384
        return nil unless client.wait_readable(1)

        chunk = client.read_nonblock(4096, exception: false)
        return nil if chunk.nil?
        next if chunk == :wait_readable

        head << chunk
        first ||= head[/\A[^\r\n]*/]
      end
      first
    end
  end
end
