#!/usr/bin/env bash
# Seed 000 with the real Ruby app on Debian's Ruby 3.1 / Puma 5.6 / async-http 0.59, loopback,
# wrk -t4 -c1000 -d30s as in the seed. About 5 minutes; prints every wrk report and /metrics.
#   server-images/ruby/bench/seed000.sh | tee /tmp/seed000.txt
set -euo pipefail
cd "$(dirname "$0")"
# run SERVER VAR=VALUE…: one wrk run against SERVER with these env settings.
run() { local server=$1; shift; echo; env "$@" ./wrk-run.sh "$server"; }
run puma WEB_CONCURRENCY=1 RAILS_MAX_THREADS=20 URL_PATH=/b
run puma WEB_CONCURRENCY=1 RAILS_MAX_THREADS=20 URL_PATH=/b TIMEOUT=30s
run falcon WEB_CONCURRENCY=1 URL_PATH=/b
run puma WEB_CONCURRENCY=4 RAILS_MAX_THREADS=20 URL_PATH=/b
run falcon WEB_CONCURRENCY=4 DB_CONCURRENCY=20 URL_PATH=/b
run puma WEB_CONCURRENCY=4 RAILS_MAX_THREADS=20 URL_PATH=/c TIMEOUT=10s
run falcon WEB_CONCURRENCY=4 DB_CONCURRENCY=20 URL_PATH=/c TIMEOUT=10s
