# frozen_string_literal: true

# No Bundler: Rails, Puma and pg are Debian's packages (ruby-rails, puma, ruby-pg), on Ruby's
# load path already. An app with a Gemfile would `require "bundler/setup"` here.
ENV["RAILS_ENV"] ||= "production"
