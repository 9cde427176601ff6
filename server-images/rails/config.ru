# frozen_string_literal: true

# This file is used by Rack-based servers to start the application.
require_relative "config/environment"

# yabeda-prometheus' place: GET /metrics, outside Rails (not a request in rails_requests_total).
# Every request passes it, so the Puma gauges exist from the first readiness probe on.
use Shop::Metrics::Exporter

# Readiness: the app is booted and a Puma thread answered; neither Rails nor the database is
# asked, and it is not a request in the metrics.
map "/healthz" do
  run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["ok\n"]] }
end

map "/" do
  run Rails.application
end
