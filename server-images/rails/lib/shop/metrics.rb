# frozen_string_literal: true

require "fileutils"

module Shop
  # The series a Rails app with yabeda-rails, yabeda-rack-queue, yabeda-puma-plugin and
  # yabeda-activerecord exports through yabeda-prometheus, with those gems' exact names, labels
  # and buckets (no gems here: Debian packages no yabeda), written in Prometheus' text format by
  # hand. With CONCURRENCY_METRICS=1, also the concurrency-metrics gem's series, the DB pool wait
  # counter among them (lib/shop/concurrency_metrics.rb).
  #
  # One process keeps its values in memory. With METRICS_DIR (Puma cluster mode, see
  # config/puma.rb, or bin/serve's METRICS_PORT) every Puma process also writes them to its own
  # file and whichever serves /metrics sums the counters and histograms of all files —
  # yabeda-prometheus' DirectFileStore scheme; a dead worker's file stays, so the sums never go
  # back.
  module Metrics
    # yabeda-rails' LONG_RUNNING_REQUEST_BUCKETS.
    REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600].freeze
    # yabeda-rack-queue's buckets.
    QUEUE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60].freeze
    # Upper bound on how stale another worker's values can be on /metrics.
    FLUSH_INTERVAL = 0.2
    # Label sets per series family and process.
    MAX_SERIES = 500
    PUMA_STATS = %i[backlog running busy_threads pool_capacity max_threads requests_count].freeze
    POOL_STATS = %i[size connections busy dead idle waiting].freeze

    # zero: a label-less counter that is 0 before its first increment (as client_ruby writes
    # one), so a rate over it exists from the start.
    Family = Struct.new(:name, :type, :help, :buckets, :zero)

    # Labelled counters, histograms and gauges of this process, and the text of all processes.
    # An aggregator (aggregator: true, bin/serve's METRICS_PORT listener) has no values of its
    # own: it renders the files of the processes that do, with the series they declared.
    class Store
      def initialize(dir: nil, aggregator: false)
        raise ArgumentError, "an aggregator needs a metrics directory" if aggregator && dir.nil?

        @dir = dir
        @aggregator = aggregator
        @families = {}
        @collectors = []
        @mutex = Mutex.new
        @pid = nil
      end

      attr_reader :dir

      def counter(name, help, zero: false) = register(name, :counter, help, nil, zero)
      def gauge(name, help) = register(name, :gauge, help)
      def histogram(name, help, buckets) = register(name, :histogram, help, buckets)

      def registered?(name) = @families.key?(name)

      # A block run before every render and flush that sets gauges (yabeda's `collect`).
      def collect(&block)
        @collectors << block
      end

      def increment(name, labels = {}, by = 1)
        update(name, labels) { |v| (v || 0) + by }
      end

      def set(name, labels, value)
        update(name, labels) { value }
      end

      def observe(name, labels, value)
        bounds = family(name).buckets
        update(name, labels) do |v|
          v ||= Array.new(bounds.size + 3, 0) # per-bucket counts, +Inf, sum, count
          i = bounds.index { |le| value <= le } || bounds.size
          v[i] += 1
          v[-2] += value
          v[-1] += 1
          v
        end
      end

      # Text exposition format 0.0.4 of every process's values.
      def render
        return render_states(other_states) if @aggregator

        run_collectors
        own = @mutex.synchronize do
          reset_if_forked
          flush_locked if @dir
          Marshal.load(Marshal.dump(@state))
        end
        render_states([own] + other_states)
      end

      # Runs in a background thread of each process with a metrics directory (#start_flusher).
      def flush
        run_collectors
        @mutex.synchronize do
          reset_if_forked
          flush_locked if @dirty
        end
      end

      private

      def render_states(states)
        families = @aggregator ? states.flat_map { |st| st[:families].values }.uniq(&:name) : @families.values
        text = families.flat_map { |f| lines_of(f, states) }.join("\n")
        text.empty? ? text : text << "\n"
      end

      def register(name, type, help, buckets = nil, zero = false)
        raise ArgumentError, "metric #{name} registered twice" if @families.key?(name)

        @families[name] = Family.new(name, type, help, buckets&.dup&.freeze, zero)
        @dirty = true # the next flush publishes the declaration
      end

      def family(name)
        @families.fetch(name) { raise ArgumentError, "unregistered metric #{name}" }
      end

      def update(name, labels)
        f = family(name)
        key = labels.transform_keys(&:to_s).transform_values(&:to_s).freeze
        @mutex.synchronize do
          reset_if_forked
          series = (@state[:values][f.name] ||= {})
          # The format label is the request's Accept type, whatever a client sends: past this
          # many label sets a series family takes no new ones (its existing ones still count).
          next if !series.key?(key) && series.size >= MAX_SERIES

          old = series[key]
          series[key] = yield(old)
          # Gauges are set on every flush; an unchanged one does not rewrite the file.
          @dirty = true unless f.type == :gauge && series[key] == old
        end
      end

      def run_collectors
        @collectors.each(&:call)
      end

      # A forked worker starts from nothing: the master's values are the master's.
      def reset_if_forked
        return if @pid == Process.pid

        @pid = Process.pid
        # The declarations travel with the values, for an aggregator that loads no app.
        @state = { pid: @pid, values: {}, families: @families }
        @dirty = true
        start_flusher if @dir
      end

      def start_flusher
        Thread.new do
          loop do
            sleep FLUSH_INTERVAL
            flush
          rescue StandardError => e
            warn "metrics flush: #{e.class}: #{e.message}"
          end
        end
      end

      def file_for(pid) = File.join(@dir, "worker-#{pid}.metrics")

      # Atomic replace: a reader sees the old or the new file, never a torn one.
      def flush_locked
        FileUtils.mkdir_p(@dir)
        tmp = "#{file_for(@pid)}.tmp"
        File.binwrite(tmp, Marshal.dump(@state))
        File.rename(tmp, file_for(@pid))
        @dirty = false
      end

      def other_states
        return [] unless @dir

        Dir.glob(File.join(@dir, "worker-*.metrics")).filter_map do |path|
          next if !@aggregator && path == file_for(Process.pid)

          Marshal.load(File.binread(path))
        rescue Errno::ENOENT, TypeError, ArgumentError
          nil
        end
      end

      def lines_of(f, states)
        merged = {}
        states.each do |st|
          # A gauge is a live process's own view (its thread pool, its connection pool); a
          # dead worker's counters still count.
          next if f.type == :gauge && !alive?(st[:pid])

          st[:values].fetch(f.name, {}).each do |labels, v|
            # Gauges of several processes stay apart (DirectFileStore's `pid` label) unless
            # they carry their own worker label already.
            labels = labels.merge("pid" => st[:pid].to_s) if f.type == :gauge && @dir && !labels.key?("index")
            merged[labels] = merged.key?(labels) ? add(f, merged[labels], v) : v
          end
        end
        merged[{}] = 0 if f.zero && merged.empty?
        out = ["# HELP #{f.name} #{f.help}", "# TYPE #{f.name} #{f.type}"]
        merged.each do |labels, v|
          if f.type == :histogram
            histogram_lines(out, f, labels, v)
          else
            out << "#{f.name}#{label_text(labels)} #{number(v)}"
          end
        end
        out
      end

      def add(f, a, b)
        return b if f.type == :gauge
        return a + b unless f.type == :histogram

        a.zip(b).map(&:sum)
      end

      def histogram_lines(out, f, labels, v)
        cumulative = 0
        f.buckets.each_with_index do |le, i|
          cumulative += v[i]
          out << "#{f.name}_bucket#{label_text(labels.merge('le' => le.to_s))} #{cumulative}"
        end
        out << "#{f.name}_bucket#{label_text(labels.merge('le' => '+Inf'))} #{cumulative + v[f.buckets.size]}"
        out << "#{f.name}_sum#{label_text(labels)} #{number(v[-2])}"
        out << "#{f.name}_count#{label_text(labels)} #{v[-1]}"
      end

      def label_text(labels)
        return "" if labels.empty?

        "{#{labels.map { |k, v| %(#{k}="#{v.gsub('\\', '\\\\\\\\').gsub('"', '\\"').gsub("\n", '\\n')}") }.join(',')}}"
      end

      def number(v)
        v.is_a?(Float) ? format("%.9g", v) : v.to_s
      end

      def alive?(pid)
        return true if pid == Process.pid

        Process.kill(0, pid)
        true
      rescue Errno::ESRCH
        false
      rescue Errno::EPERM
        true
      end
    end

    class << self
      attr_reader :store

      # Declares the yabeda gems' series and subscribes to Rails' events; called once at boot.
      def install!(store)
        @store = store
        store.counter(:rails_requests_total, "A counter of the total number of HTTP requests rails processed.")
        store.histogram(:rails_request_duration_seconds, "A histogram of the response latency.", REQUEST_BUCKETS)
        store.histogram(:rails_view_runtime_seconds, "A histogram of the view rendering time.", REQUEST_BUCKETS)
        store.histogram(:rails_db_runtime_seconds, "A histogram of the activerecord execution time.", REQUEST_BUCKETS)
        store.histogram(:rack_queue_duration_seconds,
                        "Time a request waited in the upstream queue before reaching the application", QUEUE_BUCKETS)
        install_puma(store)
        install_activerecord(store)
        # With a metrics directory, this process's file (and its flusher) from the start.
        store.flush if store.dir
        ActiveSupport::Notifications.subscribe("process_action.action_controller") do |*args|
          record_action(ActiveSupport::Notifications::Event.new(*args))
        end
      end

      # yabeda-rails' handler of process_action.action_controller: its labels, its rounding.
      def record_action(event)
        p = event.payload
        labels = { controller: p[:params]["controller"], action: p[:params]["action"],
                   status: status_of(p), format: p[:format], method: p[:method].to_s.downcase }
        store.increment(:rails_requests_total, labels)
        store.observe(:rails_request_duration_seconds, labels, ms2s(event.duration))
        store.observe(:rails_view_runtime_seconds, labels, ms2s(p[:view_runtime]))
        store.observe(:rails_db_runtime_seconds, labels, ms2s(p[:db_runtime]))
      end

      # The Puma server of the current worker, seen by the exporter on every request.
      attr_accessor :puma_server

      private

      def ms2s(ms) = (ms.to_f / 1000).round(3)

      def status_of(payload)
        if payload[:status].nil? && payload[:exception]
          ActionDispatch::ExceptionWrapper.status_code_for_exception(payload[:exception].first)
        else
          payload[:status]
        end
      end

      # yabeda-puma-plugin: the worker's Puma::Server#stats, labelled with its index (0 in
      # single mode). Puma 5.6 has no busy_threads stat, so that gauge has no series (the
      # plugin declares it; yabeda-prometheus then writes none).
      def install_puma(store)
        helps = { backlog: "Number of established but unaccepted connections in the backlog",
                  running: "Number of running worker threads", busy_threads: "Number of busy worker threads",
                  pool_capacity: "Number of allocatable worker threads", max_threads: "Maximum number of worker threads",
                  requests_count: "Number of requests this worker has served since starting" }
        PUMA_STATS.each { |k| store.gauge(:"puma_#{k}", helps.fetch(k)) }
        store.collect do
          server = puma_server
          next unless server

          stats = server.stats
          index = ENV.fetch("PUMA_WORKER_INDEX", "0")
          PUMA_STATS.each { |k| store.set(:"puma_#{k}", { index: index }, stats[k]) if stats.key?(k) }
        end
      end

      # yabeda-activerecord's connection pool gauges, per database config.
      def install_activerecord(store)
        helps = { size: "Connection pool size",
                  connections: "Total number of connections currently created in the pool (sum of busy, dead, and idle).",
                  busy: "Number of connections that has been checked out by some thread and are in use now.",
                  dead: "Number of lost connections for the pool.",
                  idle: "Number of free connections, that are available for checkout.",
                  waiting: "Number of threads waiting for a connection to become available for checkout." }
        POOL_STATS.each { |k| store.gauge(:"activerecord_connection_pool_#{k}", helps.fetch(k)) }
        store.gauge(:activerecord_connection_pool_checkout_timeout_seconds, "Checkout waiting timeout in seconds")
        store.collect do
          next unless ActiveRecord::Base.connected?

          ActiveRecord::Base.connection_handler.connection_pool_list.each do |pool|
            stat = pool.stat
            tags = { config: pool.db_config.name }
            POOL_STATS.each { |k| store.set(:"activerecord_connection_pool_#{k}", tags, stat[k]) }
            store.set(:activerecord_connection_pool_checkout_timeout_seconds, tags, stat[:checkout_timeout])
          end
        end
      end

      # (ruby_db_pool_wait_seconds_total: the concurrency-metrics gem times ActiveRecord's
      # checkout waits, lib/shop/concurrency_metrics.rb.)
    end

    # yabeda-rack-queue's middleware: X-Request-Start or X-Queue-Start (first value; `t=`
    # optional; seconds, milliseconds or microseconds since the epoch, told apart by which one
    # lands between 2000 and now + 30 s) to now, minus Puma's request-body wait; a negative
    # difference (clock skew) is dropped.
    class QueueTime
      HEADERS = %w[HTTP_X_REQUEST_START HTTP_X_QUEUE_START].freeze
      MIN_EPOCH = Time.utc(2000, 1, 1).to_f
      FUTURE_TOLERANCE = 30.0
      NUMBER = /[+-]?(?:\d+(?:\.\d+)?|\.\d+)/.freeze
      T_EQUALS = /t\s*=\s*(#{NUMBER.source})/i.freeze

      def initialize(app)
        @app = app
      end

      def call(env)
        now = Process.clock_gettime(Process::CLOCK_REALTIME)
        start = HEADERS.lazy.filter_map { |h| env[h] && self.class.parse(env[h], now) }.first
        record(env, now - start) if start
        @app.call(env)
      end

      def self.parse(value, now)
        first = value.to_s.split(",", 2).first.to_s.strip
        token = first[T_EQUALS, 1] || first[NUMBER, 0]
        return nil if token.nil?

        raw = Float(token)
        [1_000_000.0, 1_000.0, 1.0].each do |divisor|
          t = raw / divisor
          return t if t >= MIN_EPOCH && t <= now + FUTURE_TOLERANCE
        end
        nil
      rescue ArgumentError, TypeError
        nil
      end

      private

      def record(env, seconds)
        return if seconds.negative?

        body_wait = Float(env["puma.request_body_wait"], exception: false)
        seconds -= body_wait / 1000.0 if body_wait && !body_wait.negative?
        Metrics.store.observe(:rack_queue_duration_seconds, {}, [seconds, 0.0].max)
      end
    end

    # yabeda-prometheus' Rack exporter (`use Yabeda::Prometheus::Exporter` in config.ru): GET
    # /metrics answers the text format; every other request goes on to the app. It also notes
    # the worker's Puma server, whose stats the Puma gauges read.
    class Exporter
      def initialize(app, path: "/metrics")
        @app = app
        @path = path
      end

      def call(env)
        Metrics.puma_server ||= Puma::Server.current if defined?(Puma::Server) && Puma::Server.respond_to?(:current)
        return @app.call(env) unless env["PATH_INFO"] == @path

        [200, { "Content-Type" => "text/plain; version=0.0.4; charset=utf-8" }, [Metrics.store.render]]
      end
    end
  end
end
