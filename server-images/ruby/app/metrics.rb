# frozen_string_literal: true

require "fileutils"

module Reference
  # Prometheus metrics written by hand (no client gem). One process keeps its counters in
  # memory; with several worker processes (Puma cluster mode, the async launcher with
  # WEB_CONCURRENCY > 1) every worker also writes its counters to its own file in
  # METRICS_DIR, and whichever worker serves /metrics sums all files — the scheme of
  # prometheus_exporter's/client_ruby's DirectFileStore. Files of workers that died stay and
  # keep counting, so the sums stay monotonic across worker restarts.
  class Metrics
    # yabeda-rails' default buckets (seconds); the large ones cover requests queued behind a
    # saturated thread pool.
    BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60].freeze
    # Queue time is ~0 while threads are free, so the low end is finer (as gvl-sim's).
    QUEUE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5,
                     2.5, 5, 7.5, 10].freeze
    # yabeda-rack-queue's buckets (`rack_queue_duration_seconds`), for METRICS_NAMES=yabeda.
    RACK_QUEUE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60].freeze
    # Upper bound on how stale another worker's numbers can be on /metrics.
    FLUSH_INTERVAL = 0.2

    attr_reader :gvl_source

    # aggregator: true for a process that serves no requests and only sums the workers'
    # files (bin/serve's METRICS_PORT listener); it needs dir.
    # names: "reference" (this app's own names) or "yabeda" (yabeda-rails, yabeda-rack-queue and
    # yabeda-puma-plugin's exact series: the queue histogram is rack_queue_duration_seconds
    # with that gem's buckets, the Puma gauges are labelled by worker index and include
    # puma_busy_threads) — what the operator's `preset: yabeda` reads.
    def initialize(dir:, server:, gvl_source:, aggregator: false, names: "reference")
      raise ArgumentError, "an aggregator needs a metrics directory" if aggregator && dir.nil?
      raise ArgumentError, "unknown metric names #{names.inspect}" unless %w[reference yabeda].include?(names)

      @yabeda = names == "yabeda"
      @queue_bounds = @yabeda ? RACK_QUEUE_BUCKETS : QUEUE_BUCKETS

      @dir = dir
      @server = server
      @gvl_source = gvl_source
      @aggregator = aggregator
      @mutex = Mutex.new
      @pid = nil
      reset_for_this_process
    end

    def record(status, timing)
      @mutex.synchronize do
        reset_for_this_process if @pid != Process.pid
        s = @state
        i = BUCKETS.index { |le| timing.wall <= le } || BUCKETS.size
        s[:buckets][i] += 1
        s[:sum] += timing.wall
        s[:count] += 1
        s[:status][status.to_s] = s[:status].fetch(status.to_s, 0) + 1
        s[:running] += timing.cpu
        s[:io] += timing.io
        s[:gvl] += timing.gvl
        s[:pool] += timing.pool
        s[:runqueue] += timing.runqueue
        @dirty = true
        flush_locked if @dir && Timing.now - @flushed_at >= FLUSH_INTERVAL
      end
    end

    # One tick of the async worker's event-loop probe: `late` seconds after it was due, out of
    # `covered` seconds it waited in all (EventLoopProbe).
    def record_loop_lag(late, covered)
      @mutex.synchronize do
        reset_for_this_process if @pid != Process.pid
        @state[:loop_lag] += late
        @state[:loop_probe] += covered
        @dirty = true
      end
    end

    # Request queue time (seconds) of one request that carried X-Request-Start.
    def record_queue_time(seconds)
      @mutex.synchronize do
        reset_for_this_process if @pid != Process.pid
        s = @state
        i = @queue_bounds.index { |le| seconds <= le } || @queue_bounds.size
        s[:queue_buckets][i] += 1
        s[:queue_sum] += seconds
        s[:queue_count] += 1
        @dirty = true
      end
    end

    # Text exposition format 0.0.4.
    def render
      states = all_states
      total = merge(states)
      lines = []
      histogram(lines, "rails_request_duration_seconds", BUCKETS, total[:buckets], total[:sum], total[:count],
                "Time spent in the Rack app per request (excludes time queued in the server).")
      if @yabeda
        histogram(lines, "rack_queue_duration_seconds", @queue_bounds, total[:queue_buckets],
                  total[:queue_sum], total[:queue_count],
                  "Time a request waited in the upstream queue before reaching the application")
      else
        histogram(lines, "rails_request_queue_time_seconds", @queue_bounds, total[:queue_buckets],
                  total[:queue_sum], total[:queue_count],
                  "Time from the load balancer's X-Request-Start to the app picking the request up.")
      end
      lines << "# HELP rails_requests_total Requests answered by the Rack app, by HTTP status."
      lines << "# TYPE rails_requests_total counter"
      total[:status].sort.each { |code, n| lines << %(rails_requests_total{status="#{code}"} #{n}) }
      counter(lines, "ruby_running_seconds_total", total[:running],
              "Thread CPU time spent running request code (holding the GVL).")
      counter(lines, "ruby_io_wait_seconds_total", total[:io],
              "Time requests spent in dependency calls (sleep / HTTP / DB-like waits), GVL released.")
      counter(lines, "ruby_gvl_wait_seconds_total", total[:gvl],
              gvl_source == "gvltools" ? "GVL wait measured with gvltools (Ruby >= 3.2)." :
              "ESTIMATE: request wall time - running - io wait - pool wait - run-queue wait.")
      counter(lines, "ruby_db_pool_wait_seconds_total", total[:pool],
              "Time requests waited for a DB slot (Async::Semaphore, DB_CONCURRENCY).")
      counter(lines, "ruby_event_loop_lag_seconds_total", total[:loop_lag],
              "Seconds the async worker's event loop ran its probe timer late (a blocking call stalls every fiber); 0 under Puma.")
      counter(lines, "ruby_event_loop_probe_seconds_total", total[:loop_probe],
              "Seconds the event-loop probe's timers covered: eventLoopLag's denominator.")
      counter(lines, "ruby_cpu_runqueue_wait_seconds_total", total[:runqueue],
              "Time request threads were runnable but not given a CPU by the kernel (schedstat).")
      puma_gauges(lines, states)
      lines << "# HELP ruby_gvl_metrics_info How the GVL counters are produced."
      lines << "# TYPE ruby_gvl_metrics_info gauge"
      lines << %(ruby_gvl_metrics_info{server="#{@server}",gvl_source="#{gvl_source}",runqueue_source="#{RunQueue.available? ? 'schedstat' : 'none'}",ruby_version="#{RUBY_VERSION}"} 1)
      lines << "# HELP reference_app_worker_processes Worker processes that have reported metrics."
      lines << "# TYPE reference_app_worker_processes gauge"
      lines << "reference_app_worker_processes #{states.size}"
      lines.join("\n") << "\n"
    end

    def flush
      @mutex.synchronize do
        changed = sample_server_locked
        flush_locked if @dir && (@dirty || changed)
      end
    end

    # Puma's own view of its thread pool (Puma::Server#stats: backlog, running, pool_capacity,
    # max_threads), which shows queued requests that the app-side histogram cannot see.
    # Called from request threads; the server object is per worker.
    def attach_server(server)
      return if server.nil? || !server.respond_to?(:stats)

      @mutex.synchronize do
        reset_for_this_process if @pid != Process.pid
        @server_ref ||= server
      end
    end

    private

    def reset_for_this_process
      # A forked worker starts from zero; the parent's numbers live in the parent's own file.
      @pid = Process.pid
      @server_ref = nil
      @state = empty_state(@pid)
      @dirty = false
      @flushed_at = 0.0
      start_flusher if @dir && !@aggregator
    end

    def empty_state(pid)
      { pid: pid, index: Integer(ENV.fetch("PUMA_WORKER_INDEX", "0"), exception: false) || 0, buckets: Array.new(BUCKETS.size + 1, 0), sum: 0.0, count: 0, status: {},
        running: 0.0, io: 0.0, gvl: 0.0, pool: 0.0, runqueue: 0.0, loop_lag: 0.0, loop_probe: 0.0, puma: nil,
        queue_buckets: Array.new(@queue_bounds.size + 1, 0), queue_sum: 0.0, queue_count: 0 }
    end

    # Writes the last requests of a worker that then goes idle.
    def start_flusher
      Thread.new do
        loop do
          sleep FLUSH_INTERVAL
          flush
        end
      end
    end

    def file_for(pid)
      File.join(@dir, "worker-#{pid}.metrics")
    end

    # Atomic replace: readers see the old or the new file, never a torn one.
    def flush_locked
      FileUtils.mkdir_p(@dir)
      tmp = "#{file_for(@pid)}.tmp"
      File.binwrite(tmp, Marshal.dump(@state))
      File.rename(tmp, file_for(@pid))
      @dirty = false
      @flushed_at = Timing.now
    end

    def sample_server_locked
      return false unless @server_ref

      sample = @server_ref.stats.slice(:backlog, :running, :pool_capacity, :max_threads, :busy_threads)
      changed = sample != @state[:puma]
      @state[:puma] = sample
      changed
    end

    def all_states
      own = @mutex.synchronize do
        reset_for_this_process if @pid != Process.pid
        sample_server_locked
        Marshal.load(Marshal.dump(@state))
      end
      return [own] unless @dir

      others = Dir.glob(File.join(@dir, "worker-*.metrics")).filter_map do |path|
        next if path == file_for(Process.pid)

        Marshal.load(File.binread(path))
      rescue Errno::ENOENT, TypeError, ArgumentError
        nil
      end
      @aggregator ? others : [own] + others
    end

    def merge(states)
      acc = empty_state(nil)
      states.each do |s|
        acc[:buckets] = acc[:buckets].zip(s[:buckets]).map(&:sum)
        acc[:queue_buckets] = acc[:queue_buckets].zip(s[:queue_buckets]).map(&:sum)
        %i[sum count running io gvl pool runqueue queue_sum queue_count].each { |k| acc[k] += s[k] }
        # A file written before the probe existed has no lag keys.
        %i[loop_lag loop_probe].each { |k| acc[k] += s.fetch(k, 0.0) }
        s[:status].each { |code, n| acc[:status][code] = acc[:status].fetch(code, 0) + n }
      end
      acc
    end

    # Gauges are per worker (label worker=pid; index=N, the worker's index, in yabeda's
    # names) and only for workers that are still alive; a dead worker's counters still count,
    # its thread pool does not.
    def puma_gauges(lines, states)
      live = states.select { |st| st[:puma] && alive?(st[:pid]) }
      return if live.empty?

      gauges = { backlog: "Requests waiting for a Puma thread in this worker.",
                 running: "Puma threads spawned in this worker.",
                 pool_capacity: "Requests this worker could take right now.",
                 max_threads: "Puma's maximum threads in this worker." }
      # Puma 6's busy_threads (spawned − waiting + backlog); Puma 5 has no such stat, and
      # spawned − waiting is max_threads − pool_capacity.
      gauges[:busy_threads] = "Number of busy worker threads" if @yabeda
      gauges.each do |key, help|
        lines << "# HELP puma_#{key} #{help}"
        lines << "# TYPE puma_#{key} gauge"
        live.each do |st|
          label = @yabeda ? %(index="#{st[:index]}") : %(worker="#{st[:pid]}")
          lines << %(puma_#{key}{#{label}} #{gauge_value(st[:puma], key)})
        end
      end
    end

    def gauge_value(puma, key)
      return puma[key].to_i unless key == :busy_threads
      return puma[:busy_threads].to_i if puma.key?(:busy_threads)

      puma[:max_threads].to_i - puma[:pool_capacity].to_i + puma[:backlog].to_i
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

    def histogram(lines, name, bounds, buckets, sum, count, help)
      lines << "# HELP #{name} #{help}"
      lines << "# TYPE #{name} histogram"
      cumulative = 0
      bounds.each_with_index do |le, i|
        cumulative += buckets[i]
        lines << %(#{name}_bucket{le="#{le}"} #{cumulative})
      end
      cumulative += buckets[bounds.size]
      lines << %(#{name}_bucket{le="+Inf"} #{cumulative})
      lines << "#{name}_sum #{format_float(sum)}"
      lines << "#{name}_count #{count}"
    end

    def counter(lines, name, value, help)
      lines << "# HELP #{name} #{help}"
      lines << "# TYPE #{name} counter"
      lines << "#{name} #{format_float(value)}"
    end

    def format_float(value)
      format("%.9g", value)
    end
  end
end
