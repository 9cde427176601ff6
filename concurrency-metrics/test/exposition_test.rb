# frozen_string_literal: true

require_relative "test_helper"
require "concurrency_metrics/exposition"
require "net/http"
require "socket"

# The Puma plugin's /metrics listener (prometheus_client backend).
class ExpositionTest < Minitest::Test
  def setup
    @renders = 0
    @listener = ConcurrencyMetrics::Exposition.new(host: "127.0.0.1", port: 0,
                                                   render: -> { @renders += 1; "ruby_sampled_requests_total 3\n" }).start
  end

  def teardown
    @listener.close
  end

  def test_serves_metrics_and_nothing_else
    res = Net::HTTP.get_response(URI("http://127.0.0.1:#{@listener.port}/metrics?x=1"))
    assert_equal "200", res.code
    assert_equal "ruby_sampled_requests_total 3\n", res.body
    assert_equal "text/plain; version=0.0.4", res["content-type"]
    assert_equal "404", Net::HTTP.get_response(URI("http://127.0.0.1:#{@listener.port}/orders")).code
    assert_equal 1, @renders
  end

  def test_a_client_that_never_finishes_its_headers_does_not_block_others
    idle = TCPSocket.new("127.0.0.1", @listener.port)
    idle.write("GET /metrics HTTP/1.1\r\n") # and nothing more
    assert_equal "200", Net::HTTP.get_response(URI("http://127.0.0.1:#{@listener.port}/metrics")).code
  ensure
    idle&.close
  end
end
