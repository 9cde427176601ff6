# frozen_string_literal: true

require_relative "test_helper"

# sample_rate: only a share of requests is measured, and per-request figures stay right when
# divided by ruby_sampled_requests_total (not by all requests).
class SamplingTest < Minitest::Test
  def teardown
    ConcurrencyMetrics.reset!
  end

  def configure(rate, seed)
    @recorder = Recorder.new
    ConcurrencyMetrics.configure do |c|
      c.backend = @recorder
      c.sample_rate = rate
      c.random = Random.new(seed)
    end
  end

  def test_one_percent_measures_the_requests_the_random_draw_picks
    configure(0.01, 42)
    calls = 0
    mw = ConcurrencyMetrics::Middleware.new(->(_env) { calls += 1; [200, {}, []] })
    4000.times { mw.call("PATH_INFO" => "/") }
    draw = Random.new(42)
    expected = 4000.times.count { draw.rand < 0.01 }
    assert_equal 4000, calls, "every request is served"
    assert_equal expected, @recorder.samples.size
    assert_includes 15..70, expected
    assert_equal({ gvl_source: ConcurrencyMetrics.gvl_source, runqueue_source: Work.runqueue_source, sample_rate: "0.01", ruby_version: RUBY_VERSION },
                 @recorder.info)
  end

  def test_per_request_figures_divide_by_sampled_requests
    configure(0.1, 7)
    mw = ConcurrencyMetrics::Middleware.new(lambda do |_env|
      ConcurrencyMetrics.io_wait { sleep 0.002 }
      [200, {}, []]
    end)
    300.times { mw.call("PATH_INFO" => "/") }
    sampled = @recorder.samples.size
    assert_operator sampled, :>, 10
    # (Estimate mode: the kernel's run-queue wait after each wake-up is its own figure.)
    io = @recorder.sum(:io_wait) + @recorder.sum(:runqueue_wait)
    per_request = io / sampled
    assert_operator per_request, :>=, 0.0019, "I/O per request over the sampled requests"
    # Over all requests it would be about sample_rate times too small.
    assert_operator io / 300, :<, per_request / 3
  end

  def test_settings_are_checked_naming_the_setting
    c = ConcurrencyMetrics::Config.new
    [0, -0.1, 1.5, "often", Float::NAN, nil].each do |bad|
      err = assert_raises(ConcurrencyMetrics::ConfigError) { c.sample_rate = bad }
      assert_match(/sample_rate must be a number in \(0, 1\]/, err.message)
    end
    c.sample_rate = "0.25"
    assert_equal 0.25, c.sample_rate
    assert_match(/backend must be one of yabeda, prometheus_exporter, prometheus_client/,
                 assert_raises(ConcurrencyMetrics::ConfigError) { c.backend = :statsd }.message)
    assert_match(/instrument: unknown :redis/,
                 assert_raises(ConcurrencyMetrics::ConfigError) { c.instrument = %i[net_http redis] }.message)
    assert_match(/gvl must be :auto, :hook or :estimate/,
                 assert_raises(ConcurrencyMetrics::ConfigError) { c.gvl = :fast }.message)
    assert_match(/backend is not set/,
                 assert_raises(ConcurrencyMetrics::ConfigError) { ConcurrencyMetrics.configure }.message)
  end

  def test_ignore_paths_strings_and_regexps
    c = ConcurrencyMetrics::Config.new
    c.ignore_paths = ["/metrics", %r{\A/assets/}]
    assert c.ignored?("/metrics")
    assert c.ignored?("/assets/app.js")
    refute c.ignored?("/metrics/extra")
    refute c.ignored?("/orders")
  end
end
