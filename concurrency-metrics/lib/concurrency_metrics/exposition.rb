# frozen_string_literal: true

require "socket"

module ConcurrencyMetrics
  # /metrics for the prometheus_client backend, served by the Puma plugin from Puma's own
  # (master) process on a port of its own: a saturated Puma answers /metrics on the app port only
  # when a thread frees up — a scrape times out exactly when the numbers matter — while this
  # listener answers at once, summing every worker's files. Plain sockets: scrapes are rare.
  class Exposition
    # The text of every worker's series: prometheus-client-mmap's per-process files in
    # prometheus_multiproc_dir, or client_ruby's registry (its DirectFileStore sums the files).
    def self.text
      require "prometheus/client"
      require "prometheus/client/formats/text"
      formats = ::Prometheus::Client::Formats::Text
      if formats.respond_to?(:marshal_multiprocess)
        formats.marshal_multiprocess(::Prometheus::Client.configuration.multiprocess_files_dir)
      else
        formats.marshal(::Prometheus::Client.registry)
      end
    end

    attr_reader :port

    def initialize(host:, port:, render: Exposition.method(:text))
      @server = TCPServer.new(host, port)
      @port = @server.addr[1]
      @render = render
    end

    def start
      @thread = Thread.new do
        loop do
          client = @server.accept
          Thread.new(client) { |c| answer(c) }
        end
      rescue IOError, SystemCallError
        nil # closed at shutdown
      end
      self
    end

    def close
      @server.close
    end

    private

    def answer(client)
      line = read_head(client)
      return if line.nil?

      method, path, = line.split(" ", 3)
      status, body =
        if method == "GET" && path.to_s.split("?", 2).first == "/metrics"
          [200, @render.call]
        else
          [404, "not found\n"]
        end
      client.write("HTTP/1.1 #{status} #{status == 200 ? 'OK' : 'Not Found'}\r\n" \
                   "Content-Type: text/plain; version=0.0.4\r\nContent-Length: #{body.bytesize}\r\n" \
                   "Connection: close\r\n\r\n#{body}")
    rescue StandardError => e
      warn "concurrency_metrics: /metrics failed: #{e.class}: #{e.message}"
    ensure
      client.close
    end

    # The request line once the headers are in; bounded in time (5 s) and size (16 KiB).
    def read_head(client)
      deadline = Timing.now + 5
      head = +""
      until head.include?("\r\n\r\n") || head.include?("\n\n")
        return nil if Timing.now > deadline || head.bytesize > 16_384
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
