# frozen_string_literal: true

require "socket"

# A port for a server a Ruby test suite starts (the Rails app's, the reference app's, the
# concurrency-metrics gem's): never the same one twice in a run — a server still booting has
# not bound its port yet, and bind(0) may hand it out again meanwhile (it did: "METRICS_PORT
# 40989: Address already in use") — and below the kernel's ephemeral range (32768+), where the
# tests' own client sockets take theirs.
module FreePort
  LOCK = Mutex.new
  GIVEN = {} # rubocop:disable Style/MutableConstant

  def self.take
    LOCK.synchronize do
      loop do
        port = rand(20_000...32_000)
        next if GIVEN[port]

        begin
          TCPServer.open("0.0.0.0", port).close
        rescue SystemCallError
          next
        end
        GIVEN[port] = true
        return port
      end
    end
  end
end
