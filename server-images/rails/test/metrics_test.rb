# frozen_string_literal: true

# The metrics store and the queue-time header parser, in-process (no Rails, no server).
require "minitest/autorun"
require "tmpdir"
require_relative "../lib/shop/metrics"

class MetricsTest < Minitest::Test
  QueueTime = Shop::Metrics::QueueTime
  NOW = 1_750_000_000.0

  # yabeda-rack-queue's rules: seconds, milliseconds or microseconds by magnitude, `t=`
  # optional, the first of several values, nothing before 2000 or over 30 s ahead.
  def test_queue_time_header_formats
    assert_in_delta NOW - 0.25, QueueTime.parse("t=#{NOW - 0.25}", NOW), 1e-6
    assert_in_delta NOW - 0.25, QueueTime.parse(((NOW - 0.25) * 1000).round.to_s, NOW), 1e-6
    assert_in_delta NOW - 0.25, QueueTime.parse("t=#{((NOW - 0.25) * 1_000_000).round}", NOW), 1e-6
    assert_in_delta NOW - 1, QueueTime.parse("t=#{(NOW - 1).round}, t=1", NOW), 1e-6
    assert_nil QueueTime.parse("t=#{NOW + 60}", NOW), "over 30 s in the future"
    assert_nil QueueTime.parse("t=12345", NOW), "before 2000"
    assert_nil QueueTime.parse("soon", NOW)
    assert_nil QueueTime.parse("", NOW)
  end

  def test_histogram_counter_and_label_text
    store = Shop::Metrics::Store.new
    store.histogram(:h_seconds, "H.", [0.1, 1])
    store.counter(:c_total, "C.")
    store.counter(:z_total, "Z.", zero: true)
    store.observe(:h_seconds, { a: "x" }, 0.05)
    store.observe(:h_seconds, { a: "x" }, 0.5)
    store.observe(:h_seconds, { a: "x" }, 5)
    store.increment(:c_total, { path: %(a"b\\c) }, 2)
    text = store.render
    assert_includes text, %(h_seconds_bucket{a="x",le="0.1"} 1\n)
    assert_includes text, %(h_seconds_bucket{a="x",le="1"} 2\n)
    assert_includes text, %(h_seconds_bucket{a="x",le="+Inf"} 3\n)
    assert_includes text, %(h_seconds_sum{a="x"} 5.55\n)
    assert_includes text, %(h_seconds_count{a="x"} 3\n)
    assert_includes text, %(c_total{path="a\\"b\\\\c"} 2\n)
    assert_includes text, "z_total 0\n", "a label-less counter exists before its first increment"
    assert_includes text, "# TYPE h_seconds histogram\n"
    (Shop::Metrics::MAX_SERIES + 10).times { |i| store.increment(:c_total, { accept: "type/#{i}" }) }
    assert_equal Shop::Metrics::MAX_SERIES, store.render.lines.grep(/\Ac_total\{/).size, "label sets are bounded"
    store.increment(:c_total, { path: %(a"b\\c) }, 1)
    assert_includes store.render, %(c_total{path="a\\"b\\\\c"} 3\n), "an existing one still counts"
  end

  # Puma cluster mode: each worker writes its own file; /metrics sums the counters of every
  # worker (a dead one's too: the sum never goes back) and shows only live workers' gauges.
  def test_workers_share_one_view_through_their_files
    Dir.mktmpdir do |dir|
      store = Shop::Metrics::Store.new(dir: dir)
      store.counter(:c_total, "C.")
      store.gauge(:g, "G.")
      store.gauge(:puma_backlog, "B.")
      store.increment(:c_total, {}, 1)
      store.set(:g, { config: "primary" }, 7)
      pid = fork do
        store.increment(:c_total, {}, 2)
        store.set(:g, { config: "primary" }, 3)
        store.set(:puma_backlog, { index: "1" }, 4)
        store.flush
        exit!(0)
      end
      Process.wait(pid)
      text = store.render
      assert_includes text, "c_total 3\n"
      assert_includes text, %(g{config="primary",pid="#{Process.pid}"} 7\n)
      refute_includes text, %(pid="#{pid}"), "a dead worker's gauges are gone"
      refute_includes text, "puma_backlog{"
      # bin/serve's METRICS_PORT listener: no app loaded, the declarations come with the files.
      aggregate = Shop::Metrics::Store.new(dir: dir, aggregator: true).render
      assert_includes aggregate, "# TYPE c_total counter\nc_total 3\n"
      assert_includes aggregate, %(g{config="primary",pid="#{Process.pid}"} 7\n)
    end
  end
end
