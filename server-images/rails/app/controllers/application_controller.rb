# frozen_string_literal: true

class ApplicationController < ActionController::Base
  class BadParam < StandardError; end

  rescue_from BadParam do |e|
    render json: { error: e.message }, status: :unprocessable_entity
  end

  private

  # An integer parameter within bounds, or its default; anything else answers 422 naming it.
  def int_param(name, default, range)
    raw = params[name]
    return default if raw.blank?

    n = Integer(raw.to_s, 10, exception: false)
    raise BadParam, "#{name} must be an integer in #{range}, got #{raw.to_s.inspect}" unless n && range.cover?(n)

    n
  end
end
