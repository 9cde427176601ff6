# frozen_string_literal: true

# Per-request overhead of the middleware, and of the GVL hook per GVL release:
#   ruby concurrency-metrics/bench/overhead.rb [requests]
# Builds the C extension like the tests do. Prints a table (process CPU microseconds per request,
# median of 5 rounds, each round alternating the variants so machine load hits them alike).
#
# Requests: a trivial Rack app (the middleware's own cost, nothing to hide it) and one that
# burns 1 ms of CPU (a small real request), without the middleware, with it at sample_rate 1.0
# and 0.01, on the prometheus_client backend (prometheus-client-mmap) when installed and on a
# backend that drops everything (the measurement alone).
require "etc"
require_relative "../test/native_build" # the extension built for this Ruby, the gem, Work.cpu

requests = Integer(ARGV[0] || 20_000)

class Drop
  def setup(_info) = nil
  def record(_sample) = nil
end

mmap = begin
  require "prometheus/client"
  require "prometheus/client/formats/text"
  Prometheus::Client.configuration.multiprocess_files_dir = Dir.mktmpdir("cm-bench")
  true
rescue LoadError
  false
end

trivial = ->(_env) { [200, {}, ["ok"]] }
small = lambda do |_env|
  Work.cpu(0.001)
  [200, {}, ["ok"]]
end

# Process CPU time per request: the middleware never waits, so its cost is CPU, and CPU time
# moves much less than wall time with the machine's load.
def per_request_us(app, n)
  env = { "PATH_INFO" => "/", "REQUEST_METHOD" => "GET" }
  t0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  n.times { app.call(env) }
  (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t0) / n * 1e6
end

backends = [["drop", -> { Drop.new }]]
backends << ["prometheus_client (mmap)", -> { ConcurrencyMetrics::Adapters::PrometheusClient.new(Prometheus::Client::Registry.new) }] if mmap

def variants(backends)
  list = [["no middleware", nil, nil]]
  backends.each do |name, make|
    [1.0, 0.01].each { |rate| list << ["#{name}, sample_rate #{rate}", make, rate] }
  end
  list
end

def run(app, variants, n, rounds: 5)
  results = Hash.new { |h, k| h[k] = [] }
  rounds.times do
    variants.each do |label, make, rate|
      if make.nil?
        results[label] << per_request_us(app, n)
      else
        ConcurrencyMetrics.configure do |c|
          c.backend = make.call
          c.sample_rate = rate
        end
        results[label] << per_request_us(ConcurrencyMetrics::Middleware.new(app), n)
      end
    end
  end
  results.transform_values { |v| v.sort[v.size / 2] }
end

ConcurrencyMetrics.configure { |c| c.backend = Drop.new }
puts "Ruby #{RUBY_VERSION}, gvl_source #{ConcurrencyMetrics.gvl_source}, #{Etc.nprocessors} CPUs, " \
     "load #{File.read('/proc/loadavg').split[0, 3].join(' ')}"
[["trivial app", trivial, requests], ["1 ms CPU", small, [requests / 50, 100].max]].each do |name, app, n|
  res = run(app, variants(backends), n)
  base = res["no middleware"]
  puts "\n#{name} (#{n} requests x 5 rounds, median):"
  res.each do |label, us|
    extra = label == "no middleware" ? "" : format("  (+%.1f us, %+.2f%%)", us - base, (us - base) / base * 100)
    puts format("  %-42s %9.1f us CPU/request%s", label, us, extra)
  end
end

# Estimate mode: each wrapped wait (an ActiveRecord query, a Net::HTTP call, io_wait) reads the
# clocks and, with runqueue on, the kernel's run-queue wait before and after.
[true, false].each do |rq|
  timing = ConcurrencyMetrics::Timing.new(:estimate, runqueue: rq)
  n = requests * 5
  t0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  n.times { timing.io_wait { nil } }
  us = (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t0) / n * 1e6
  puts format("#{rq ? "\n" : ''}estimate mode, one wrapped wait, runqueue #{rq ? 'on ' : 'off'}: %.1f us CPU", us)
end

# The hook runs on every GVL release/acquire of every thread, sampled request or not.
if ConcurrencyMetrics::Gvl.native_loaded? && ConcurrencyMetrics::Native.hook_available?
  r, w = IO.pipe
  ops = requests * 5
  cost = lambda do
    t0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    ops.times { w.write("x"); r.read(1) } # each call releases and re-takes the GVL
    (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t0) / ops * 1e9
  end
  off = []
  on = []
  5.times do
    ConcurrencyMetrics::Native.disable
    off << cost.call
    ConcurrencyMetrics::Native.enable
    on << cost.call
  end
  off = off.sort[2]
  on = on.sort[2]
  puts format("\nGVL hook: pipe write+read %.0f ns CPU without, %.0f ns with (+%.0f ns per 2 GVL releases)", off, on, on - off)
else
  puts "\nGVL hook: not available on this Ruby (estimate mode; nothing runs outside sampled requests)"
end
