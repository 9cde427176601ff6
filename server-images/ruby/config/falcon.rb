#!/usr/bin/env -S falcon host
# frozen_string_literal: true

# For images with the falcon gem (Dockerfile.falcon): `falcon host config/falcon.rb`, in the
# service/environment style of Falcon >= 0.44. WEB_CONCURRENCY worker processes (seed 004: one
# per core for I/O-bound apps), each an event loop with one fiber per request; config.ru limits
# DB concurrency with Async::Semaphore (DB_CONCURRENCY). NOT run on the machine this was written
# on: Falcon is not packaged in Debian 12 and rubygems was unreachable (bin/async-serve stands in).
require "falcon/environment/rack"

service "reference-app" do
  include Falcon::Environment::Rack

  root File.expand_path("..", __dir__)
  count { ENV.fetch("WEB_CONCURRENCY", 1).to_i }
  port { ENV.fetch("PORT", 3000).to_i }
  endpoint do
    Async::HTTP::Endpoint.parse("http://0.0.0.0:#{port}").with(protocol: Async::HTTP::Protocol::HTTP11)
  end
end
