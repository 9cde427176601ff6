#!/usr/bin/env bash
# One wrk run against the real Ruby app (default: seed 000 pattern B, GET /b, a 0.5 s sleep), 1000
# connections, on loopback. A benchmark, not a test: it prints numbers, it asserts nothing.
#   bench/wrk-run.sh puma           # Puma, 1 process x 20 threads
#   bench/wrk-run.sh falcon         # async-http launcher (fiber scheduler), 1 process
# Env: WEB_CONCURRENCY (1), RAILS_MAX_THREADS (20), CONNECTIONS (1000), DURATION (30s),
#      THREADS (wrk threads, 4), TIMEOUT (wrk --timeout, 2s as in the seed), PORT (18300),
#      URL_PATH (/b). Both server and wrk run under `nice -n 15` (shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:?usage: bench/wrk-run.sh puma|falcon}
port=${PORT:-18300}
conns=${CONNECTIONS:-1000}
duration=${DURATION:-30s}
wrk_threads=${THREADS:-4}
timeout=${TIMEOUT:-2s}
path=${URL_PATH:-/b}
log=$(mktemp)

ulimit -n 20000 2>/dev/null || true
SERVER=$server PORT=$port BIND_HOST=127.0.0.1 WEB_CONCURRENCY=${WEB_CONCURRENCY:-1} \
  RAILS_MAX_THREADS=${RAILS_MAX_THREADS:-20} nice -n 15 bin/serve >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/metrics" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/metrics" >/dev/null || { cat "$log"; exit 1; }

echo "== $server WEB_CONCURRENCY=${WEB_CONCURRENCY:-1} RAILS_MAX_THREADS=${RAILS_MAX_THREADS:-20} $(ruby -v | cut -d' ' -f1-2)"
echo "\$ nice -n 15 wrk -t$wrk_threads -c$conns -d$duration --timeout $timeout --latency http://127.0.0.1:$port$path"
nice -n 15 wrk -t"$wrk_threads" -c"$conns" -d"$duration" --timeout "$timeout" --latency "http://127.0.0.1:$port$path"
echo "-- /metrics after the run"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^(rails_requests_total|rails_request_duration_seconds_(sum|count)|ruby_|reference_app)'
