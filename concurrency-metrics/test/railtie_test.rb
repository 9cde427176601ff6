# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Debian's Rails (6.1): requiring the gem after Rails puts the middleware first in the stack, and
# a request through the application is measured. In a child process: Rails stays out of the
# other tests.
class RailtieTest < Minitest::Test
  SCRIPT = <<~'RUBY'
    require "rails"
    require "action_controller/railtie"
    require "concurrency_metrics"   # as Bundler.require does, after Rails
    class Recorder
      attr_reader :samples
      def initialize = (@samples = [])
      def setup(_info) = nil
      def record(s) = @samples << s
    end
    class App < Rails::Application
      config.eager_load = false
      config.logger = Logger.new(nil)
      config.secret_key_base = "x" * 64
      config.hosts.clear
      routes.append { get "/orders" => proc { [200, {}, ["ok"]] } }
    end
    RECORDER = Recorder.new
    ConcurrencyMetrics.configure { |c| c.backend = RECORDER } # config/initializers/…
    App.initialize!
    first = App.middleware.first
    status, = App.call(Rack::MockRequest.env_for("/orders"))
    puts [first.klass.name, status, RECORDER.samples.size].join(" ")
  RUBY

  def test_rails_puts_the_middleware_first_and_measures_requests
    out, err, st = Open3.capture3({ "RUBYLIB" => [LIB, NativeBuild.dir].join(":") }, RbConfig.ruby, "-e", SCRIPT)
    skip "Rails not installed" if err.include?("cannot load such file -- rails")
    assert st.success?, err
    assert_equal "ConcurrencyMetrics::Middleware 200 1", out.strip
  end
end
