# frozen_string_literal: true

require_relative "boot"

require "rails"
require "active_model/railtie"
require "active_record/railtie"
require "action_controller/railtie"
require "action_view/railtie"

require_relative "../lib/shop/settings"
require_relative "../lib/shop/metrics"
if Shop::Settings.concurrency_metrics?(ENV)
  require_relative "../lib/shop/concurrency_metrics"
  Shop::ConcurrencyMetrics.require_gem!
end

module Shop
  class Application < Rails::Application
    config.load_defaults 6.1

    # DATABASE_YML=pinned: the variant whose pool is a literal 5 whatever RAILS_MAX_THREADS
    # says (8 threads sharing 5 connections wait for the pool).
    config.paths["config/database"] = Shop::Settings.database_yml_path(root, ENV)

    # No sessions or cookies: nothing is signed with it, but Rails wants one in production.
    config.secret_key_base = ENV.fetch("SECRET_KEY_BASE") { SecureRandom.hex(64) }

    config.time_zone = "UTC"
    config.active_record.default_timezone = :utc

    # yabeda-rack-queue's place: first, before anything else runs (Rack::Sendfile, the
    # executor, the logger), so its clock starts when the app picks the request up.
    config.middleware.insert_before 0, Shop::Metrics::QueueTime
  end
end
