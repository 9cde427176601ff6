# Helpers of e2e/run and the scripts beside it (demo, measure-operator, bench); the scenarios
# themselves are Rust tests (e2e/suite).
# shellcheck shell=bash
E2E_OP_NS=${E2E_OP_NS:-concurrency-system}
E2E_RELEASE=${E2E_RELEASE:-cop}
# In-cluster Prometheus (the local cluster's Service and kind's in-cluster one share the name).
E2E_PROM_IN_CLUSTER=${E2E_PROM_IN_CLUSTER:-http://prometheus.monitoring:9090}

log() { printf '[e2e %s] %s\n' "$(date -u +%T)" "$*" >&2; }
fail() { log "FAIL: $*"; return 1; }

# wait_until TIMEOUT_S WHAT CMD...: run CMD every second until it succeeds; fail after TIMEOUT_S.
wait_until() {
  local timeout=$1 what=$2; shift 2
  local end=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    [[ $(date +%s) -lt $end ]] || fail "timed out after ${timeout}s waiting for: $what" || return 1
    sleep 1
  done
}

# prom QUERY: the first value of an instant query against $PROMETHEUS_URL (empty if none).
prom() {
  curl -sf --max-time 5 "$PROMETHEUS_URL/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
