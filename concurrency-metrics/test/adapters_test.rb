# frozen_string_literal: true

require_relative "test_helper"
require "json"
require_relative "fakes/yabeda"
require_relative "fakes/prometheus_exporter"
require_relative "fakes/client_ruby"

# Each backend adapter, from a request through the middleware to the series its exporter would
# expose: the names must be exactly the ones concurrency-operator reads.
class AdaptersTest < Minitest::Test
  OPERATOR_NAMES = %w[ruby_running_seconds_total ruby_io_wait_seconds_total ruby_gvl_wait_seconds_total].freeze
  ALL_COUNTERS = (OPERATOR_NAMES + %w[ruby_cpu_runqueue_wait_seconds_total ruby_sampled_requests_total
                                      ruby_sampled_request_duration_seconds_total]).freeze

  # Every total different, so a counter fed the wrong field cannot pass.
  S1 = ConcurrencyMetrics::Sample.new(running: 0.25, io_wait: 0.5, gvl_wait: 0.125, runqueue_wait: 0.0625, wall: 1.0)
  S2 = ConcurrencyMetrics::Sample.new(running: 0.5, io_wait: 1.0, gvl_wait: 0.0625, runqueue_wait: 0.0, wall: 2.0)
  EXPECTED = {
    "ruby_running_seconds_total" => 0.75, "ruby_io_wait_seconds_total" => 1.5,
    "ruby_gvl_wait_seconds_total" => 0.1875, "ruby_cpu_runqueue_wait_seconds_total" => 0.0625,
    "ruby_sampled_requests_total" => 2, "ruby_sampled_request_duration_seconds_total" => 3.0
  }.freeze

  def teardown
    ConcurrencyMetrics.reset!
  end

  def feed(adapter)
    ConcurrencyMetrics.configure { |c| c.backend = adapter }
    ConcurrencyMetrics.state.record(S1)
    ConcurrencyMetrics.state.record(S2)
  end

  def info_labels
    { gvl_source: ConcurrencyMetrics.gvl_source, runqueue_source: Work.runqueue_source, sample_rate: "1", ruby_version: RUBY_VERSION }
  end

  def test_yabeda_group_ruby_exported_by_yabeda_prometheus_under_the_operator_names
    FakeYabeda.reset!
    feed(ConcurrencyMetrics::Adapters::Yabeda.new(FakeYabeda))
    assert_empty FakeYabeda.metrics, "yabeda registers metrics at configure!, not before"
    FakeYabeda.configure! # yabeda's Railtie does this after the initializers
    ConcurrencyMetrics.state.record(S1)
    ConcurrencyMetrics.state.record(S2)
    series = FakeYabeda.exposition
    assert_equal (ALL_COUNTERS + ["ruby_gvl_metrics_info"]).sort, series.keys.sort
    EXPECTED.each { |name, v| assert_in_delta v, series.fetch(name).fetch({}), 1e-9, name }
    assert_equal({ info_labels => 1 }, series["ruby_gvl_metrics_info"])
  end

  def test_yabeda_configured_before_the_gem_registers_at_once
    FakeYabeda.reset!
    FakeYabeda.configure!
    feed(ConcurrencyMetrics::Adapters::Yabeda.new(FakeYabeda))
    assert_in_delta 0.1875, FakeYabeda.exposition.fetch("ruby_gvl_wait_seconds_total").fetch({}), 1e-9
  end

  def test_prometheus_exporter_custom_counters_get_the_collectors_ruby_prefix
    collector = FakePrometheusExporter::Collector.new
    adapter = ConcurrencyMetrics::Adapters::PrometheusExporter.new(FakePrometheusExporter::Client.new(collector))
    ConcurrencyMetrics.configure { |c| c.backend = adapter }
    assert_empty collector.exposition, "nothing sent from setup (it may run in Puma's master)"
    ConcurrencyMetrics.after_fork # the Puma plugin, as a worker boots
    assert_equal ALL_COUNTERS.to_h { |n| [n, { {} => 0 }] }, collector.exposition.except("ruby_gvl_metrics_info"),
                 "every counter exists at 0 before the first request"
    ConcurrencyMetrics.state.record(S1)
    ConcurrencyMetrics.state.record(S2)
    series = collector.exposition
    assert_equal (ALL_COUNTERS + ["ruby_gvl_metrics_info"]).sort, series.keys.sort
    EXPECTED.each { |name, v| assert_in_delta v, series.fetch(name).fetch({}), 1e-9, name }
    assert_equal({ info_labels.transform_keys(&:to_s) => 1 }, series["ruby_gvl_metrics_info"])
    assert_equal "counter", collector.metrics["running_seconds_total"][:type]
  end

  def test_prometheus_exporter_announces_itself_on_the_first_sampled_request_without_the_plugin
    collector = FakePrometheusExporter::Collector.new
    feed(ConcurrencyMetrics::Adapters::PrometheusExporter.new(FakePrometheusExporter::Client.new(collector)))
    assert_equal({ info_labels.transform_keys(&:to_s) => 1 }, collector.exposition["ruby_gvl_metrics_info"])
    assert_equal 2, collector.exposition["ruby_sampled_requests_total"][{}]
  end

  def test_client_ruby_keyword_api
    registry = FakeClientRuby::Registry.new
    feed(ConcurrencyMetrics::Adapters::PrometheusClient.new(registry))
    EXPECTED.each { |name, v| assert_in_delta v, registry.get(name).values.fetch({}), 1e-9, name }
    assert_equal({ info_labels => 1 }, registry.get(:ruby_gvl_metrics_info).values)
    # Configuring again (a second initializer run, a code reload) reuses the series.
    feed(ConcurrencyMetrics::Adapters::PrometheusClient.new(registry))
    assert_equal 4, registry.get(:ruby_sampled_requests_total).values.fetch({})
  end

  def test_prometheus_client_mmap_real_library_and_its_multiprocess_text
    begin
      require "prometheus/client"
      require "prometheus/client/formats/text"
    rescue LoadError
      skip "prometheus-client-mmap not installed (Debian: ruby-prometheus-client-mmap)"
    end
    skip "not the mmap client" unless Prometheus::Client::Formats::Text.respond_to?(:marshal_multiprocess)

    Dir.mktmpdir do |dir|
      Prometheus::Client.configuration.multiprocess_files_dir = dir
      Prometheus::Client.reinitialize_on_pid_change(force: true)
      registry = Prometheus::Client::Registry.new
      ConcurrencyMetrics.configure { |c| c.backend = ConcurrencyMetrics::Adapters::PrometheusClient.new(registry) }
      before = Prometheus::Client::Formats::Text.marshal_multiprocess(dir)
      ALL_COUNTERS.each { |name| assert_match(/^#{name} 0(\.0)?$/, before, "#{name} exists at 0 before the first request") }
      ConcurrencyMetrics.state.record(S1)
      ConcurrencyMetrics.state.record(S2)
      text = Prometheus::Client::Formats::Text.marshal_multiprocess(dir)
      EXPECTED.each do |name, v|
        assert_match(/^# TYPE #{name} counter$/, text)
        value = text[/^#{name} (\S+)$/, 1]
        refute_nil value, "#{name} missing in\n#{text}"
        assert_in_delta v, Float(value), 1e-9, name
      end
      assert_match(/^ruby_gvl_metrics_info\{.*gvl_source="#{ConcurrencyMetrics.gvl_source}".*\} 1/, text)
    end
  end

  # The DB pool wait: unsampled, registered only when switched on, under the operator's name.
  POOL = "ruby_db_pool_wait_seconds_total"

  def test_the_pool_wait_total_in_every_backend_only_when_switched_on
    FakeYabeda.reset!
    FakeYabeda.configure!
    yabeda = ConcurrencyMetrics::Adapters::Yabeda.new(FakeYabeda)
    collector = FakePrometheusExporter::Collector.new
    exporter = ConcurrencyMetrics::Adapters::PrometheusExporter.new(FakePrometheusExporter::Client.new(collector))
    registry = FakeClientRuby::Registry.new
    client = ConcurrencyMetrics::Adapters::PrometheusClient.new(registry)
    ConcurrencyMetrics.configure { |c| c.backend = [yabeda, exporter, client] }
    ConcurrencyMetrics.pool_waited(0.5)
    refute FakeYabeda.exposition.key?(POOL), "no ActiveRecord here: :auto leaves it off"
    assert_nil registry.get(POOL.to_sym)

    [yabeda, exporter, client].each { |a| a.setup_totals([:db_pool_wait]) }
    ConcurrencyMetrics.reset!
    state = ConcurrencyMetrics::State.new(ConcurrencyMetrics::Config.new, :estimate, [yabeda, exporter, client], [:db_pool_wait])
    ConcurrencyMetrics.instance_variable_set(:@state, state)
    ConcurrencyMetrics.after_fork
    assert_equal({ {} => 0 }, collector.exposition[POOL], "exists at 0 before the first wait")
    ConcurrencyMetrics.pool_waited(0.25)
    ConcurrencyMetrics.pool_waited(0.5)
    assert_in_delta 0.75, FakeYabeda.exposition.fetch(POOL).fetch({}), 1e-9
    assert_in_delta 0.75, collector.exposition.fetch(POOL).fetch({}), 1e-9
    assert_in_delta 0.75, registry.get(POOL.to_sym).values.fetch({}), 1e-9
  end

  def test_db_pool_wait_setting_is_checked
    err = assert_raises(ConcurrencyMetrics::ConfigError) { ConcurrencyMetrics::Config.new.db_pool_wait = "yes" }
    assert_match(/db_pool_wait must be :auto, true or false/, err.message)
  end

  def test_a_missing_library_is_a_clear_error
    err = assert_raises(ConcurrencyMetrics::ConfigError) do
      ConcurrencyMetrics.configure { |c| c.backend = :yabeda }
    end
    assert_match(/needs the yabeda gem in the Gemfile/, err.message)
  end
end
