# frozen_string_literal: true

# This file is used by Rack-based servers to start the application.
require_relative "config/environment"

# Readiness: the app is booted and a Puma thread answered; neither Rails nor the database is
# asked, and it is not a request in the metrics.
map "/healthz" do
  run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["ok\n"]] }
end

map "/" do
  # yabeda-prometheus' place: GET /metrics, outside Rails (not a request in rails_requests_total).
  use Shop::Metrics::Exporter
  run Rails.application
end
