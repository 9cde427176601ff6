# frozen_string_literal: true

# The same Rack app under Puma (config/puma.rb), the async launcher (bin/async-serve) and,
# where gems exist, Falcon (config/falcon.rb).
require_relative "app/reference_app"

settings = Reference::Env.settings(ENV)

# As in seed 000: under an async server every request is a fiber, so nothing bounds DB
# concurrency except an explicit semaphore (DB_CONCURRENCY, default 10 per worker).
db_limiter =
  if settings.server == "falcon"
    require "async/semaphore"
    Async::Semaphore.new(settings.db_concurrency)
  end

run Reference.build(settings, db_limiter: db_limiter)
