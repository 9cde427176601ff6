# frozen_string_literal: true

module ConcurrencyMetrics
  VERSION = "0.1.0"
end
