# frozen_string_literal: true

# The Rails app under Puma through bin/serve (the image's entry point), against a real
# PostgreSQL on loopback: migrate-or-wait, the endpoints' queries, the yabeda series, and the
# DB pool running out when 8 threads share 5 connections.
require_relative "support"

class AppTest < Minitest::Test
  include RailsAppTest
  # Each test has its own servers and database: booting Rails is most of their time.
  parallelize_me!

  def teardown
    @servers&.each(&:stop)
  end

  def serve(env)
    (@servers ||= []) << Server.new(env)
    @servers.last
  end

  def test_bad_settings_fail_at_start_naming_the_variable
    {
      { "RAILS_MAX_THREADS" => "0" } => "RAILS_MAX_THREADS",
      { "WEB_CONCURRENCY" => "two" } => "WEB_CONCURRENCY",
      { "PORT" => "70000" } => "PORT",
      { "DATABASE_YML" => "tiny" } => "DATABASE_YML",
      { "CONCURRENCY_METRICS" => "yes" } => "CONCURRENCY_METRICS",
      { "SHIPPING_MS" => "-1" } => "SHIPPING_MS",
      { "RAILS_MIN_THREADS" => "9", "RAILS_MAX_THREADS" => "8" } => "RAILS_MIN_THREADS",
      { "CONCURRENCY_METRICS" => "1", "CONCURRENCY_METRICS_LIB" => "/nonexistent" } => "CONCURRENCY_METRICS_LIB",
      { "CONCURRENCY_METRICS" => "1", "CONCURRENCY_METRICS_SAMPLE_RATE" => "2" } => "CONCURRENCY_METRICS_SAMPLE_RATE",
      { "PORT" => "3000", "METRICS_PORT" => "3000" } => "METRICS_PORT"
    }.each do |env, variable|
      out = IO.popen(env, [RbConfig.ruby, File.join(ROOT, "bin/serve")], err: %i[child out], &:read)
      assert_equal 2, $?.exitstatus, "#{env} must not start: #{out}"
      assert_includes out, variable, "the error for #{env} names the variable"
    end
  end

  # Started before its database exists, bin/serve waits; once it does, it migrates, seeds and
  # serves. Two threads; every endpoint does its real queries; /metrics has yabeda's series
  # and nothing of the concurrency-metrics gem.
  def test_waits_for_the_database_then_serves_the_endpoints_with_yabeda_series
    server = serve("PGDATABASE" => "shop_endpoints", "RAILS_MAX_THREADS" => "2")
    sleep 1
    refute server.ready?, "not serving before its database exists"
    Postgres.create_database("shop_endpoints")
    server.wait_ready

    page = server.get("/products")
    assert_equal "200", page.code
    assert_includes page.body, "Product 1"
    coffee = JSON.parse(server.get("/products.json?category=coffee&limit=100").body)
    assert_equal 25, coffee.size, "200 seeded products over 8 categories"
    assert_equal ["Coffee"], coffee.map { |p| p["category"] }.uniq
    before = JSON.parse(server.get("/products/7.json").body)

    created = server.post("/orders", product_id: 7, quantity: 3)
    assert_equal "201", created.code, created.body
    order = JSON.parse(created.body)
    after = JSON.parse(server.get("/products/7.json").body)
    assert_equal before["stock"] - 3, after["stock"], "the order took its stock"
    assert_equal before["sold"] + 3, after["sold"]
    lines = JSON.parse(server.get("/orders/#{order['id']}").body)["lines"]
    assert_equal [{ "product" => "Product 7", "quantity" => 3, "unit_price_cents" => order["total_cents"] / 3 }], lines
    assert_equal "422", server.post("/orders", product_id: 7, quantity: 11).code
    assert_equal "404", server.post("/orders", product_id: 999_999, quantity: 1).code
    assert_equal "404", server.get("/products/999999").code
    assert_equal(after["stock"], JSON.parse(server.get("/products/7.json").body)["stock"], "failed orders took nothing")

    quote = server.get("/products/7/shipping?ms=30", "X-Request-Start" => "t=#{(Time.now.to_f * 1000).round}")
    assert_equal "200", quote.code, quote.body
    assert_equal 30, JSON.parse(quote.body)["carrier_ms"]

    m = server.metrics
    labels = ->(c, a, s, f, meth) { %({controller="#{c}",action="#{a}",status="#{s}",format="#{f}",method="#{meth}"}) }
    assert_equal 1, m["rails_requests_total#{labels['orders', 'create', 201, '*/*', 'post']}"]
    assert_equal 1, m["rails_requests_total#{labels['orders', 'create', 422, '*/*', 'post']}"]
    assert_equal 1, m["rails_requests_total#{labels['orders', 'create', 404, '*/*', 'post']}"]
    assert_equal 3, m["rails_requests_total#{labels['products', 'show', 200, 'json', 'get']}"]
    assert_equal 1, m["rails_requests_total#{labels['products', 'shipping', 200, '*/*', 'get']}"]
    shipping = labels["products", "shipping", 200, "*/*", "get"]
    assert_operator m["rails_request_duration_seconds_sum#{shipping}"], :>=, 0.03, "the carrier's 30 ms are in it"
    assert_equal 1, m[%(rails_request_duration_seconds_bucket#{shipping.sub('}', ',le="600"}')})]
    assert_equal 11, m.select { |k, _| k.start_with?("rails_requests_total{") }.values.sum,
                 "every controller request, and neither /healthz nor /metrics"
    assert_equal 1, m["rack_queue_duration_seconds_count"], "only the request with X-Request-Start"
    assert_equal 2, m['puma_max_threads{index="0"}']
    assert m.key?('puma_backlog{index="0"}') && m.key?('puma_pool_capacity{index="0"}')
    assert_equal 2, m['activerecord_connection_pool_size{config="primary"}'], "pool: RAILS_MAX_THREADS"
    assert_equal [], m.keys.grep(/\Aruby_/), "without the gem nothing but the yabeda gems' series"
    assert server.stop.success?, "bin/serve exits 0 on TERM"
  end

  # The scenario "8 threads, 5 connections": with database.yml's pool pinned at 5, 16
  # concurrent requests that hold their connection through a 300 ms HTTP call wait for the
  # pool; with the default pool (= RAILS_MAX_THREADS = 8) the same load never waits.
  # The two start at once on a new database, as replicas do: one migrates and seeds, the
  # other waits for its migration lock and finds the schema current and the rows there.
  def test_eight_threads_on_a_pinned_pool_of_five_wait_for_connections
    Postgres.create_database("shop_pool")
    common = { "PGDATABASE" => "shop_pool", "RAILS_MAX_THREADS" => "8", "CONCURRENCY_METRICS" => "1" }
    # The pinned one also serves /metrics from bin/serve (METRICS_PORT), read below.
    metrics_port = FreePort.take
    pinned = serve(common.merge("DATABASE_YML" => "pinned", "METRICS_PORT" => metrics_port.to_s))
    default = serve(common)
    [pinned, default].each(&:wait_ready)
    assert_equal "200", Postgres.psql("SELECT count(*) FROM products", db: "shop_pool"), "seeded once"
    assert_equal "1", Postgres.psql("SELECT count(*) FROM schema_migrations", db: "shop_pool")

    waits = [pinned, default].map do |server|
      threads = Array.new(16) { |i| Thread.new { server.get("/products/#{i + 1}/shipping?ms=300").code } }
      assert_equal ["200"], threads.map(&:value).uniq
      server.metrics
    end
    # The listener sums the same files the app port renders (its workers' pid labels and all).
    sleep 2 * 0.2 # Shop::Metrics::FLUSH_INTERVAL: the last values are in the file
    listener = RailsAppTest.parse_metrics(Net::HTTP.get(URI("http://127.0.0.1:#{metrics_port}/metrics")))
    assert_equal waits[0]["ruby_db_pool_wait_seconds_total"], listener["ruby_db_pool_wait_seconds_total"]
    assert_equal 16, listener.select { |k, _| k.start_with?("rails_requests_total{") }.values.sum
    assert_equal 8, listener['puma_max_threads{index="0"}']
    assert_equal [5.0], listener.select { |k, _| k.start_with?("activerecord_connection_pool_size{") }.values
    assert_equal [5.0], waits[0].select { |k, _| k.start_with?("activerecord_connection_pool_size{") }.values
    assert_equal 8, waits[1]['activerecord_connection_pool_size{config="primary"}']
    # 16 requests on 8 threads is two rounds; in each, 3 threads wait about 300 ms for one of
    # the 5 connections (the total is far above the bound on a busy machine too).
    assert_operator waits[0]["ruby_db_pool_wait_seconds_total"], :>, 0.3
    assert_equal 0, waits[1]["ruby_db_pool_wait_seconds_total"], "8 connections for 8 threads: no wait"
    # The concurrency-metrics gem (CONCURRENCY_METRICS=1) measured every request: on Ruby 3.1
    # its estimate, with the 300 ms HTTP calls (and the pool waits) as I/O wait.
    waits.each do |m|
      assert_equal 16, m["ruby_sampled_requests_total"]
      assert_operator m["ruby_io_wait_seconds_total"], :>, 16 * 0.3 / 2
      assert m.key?("ruby_gvl_wait_seconds_total") && m.key?("ruby_running_seconds_total")
    end
    info = waits[0].select { |k, _| k.start_with?("ruby_gvl_metrics_info{") }
    assert_equal [1.0], info.values, "one info series"
    assert_match(/gvl_source="estimate".*sample_rate="1"/, info.keys.first)
  end
end
