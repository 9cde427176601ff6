# frozen_string_literal: true

module ConcurrencyMetrics
  # Rails: the middleware goes first in the stack, so everything Rails does for a request is
  # measured. Configure in config/initializers/concurrency_metrics.rb (see README.md).
  class Railtie < ::Rails::Railtie
    initializer "concurrency_metrics.middleware" do |app|
      app.config.middleware.insert(0, ConcurrencyMetrics::Middleware)
    end
  end
end
