# Helpers for the end-to-end suite (sourced by e2e/run).
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

# cexp NS NAME: the experiment as JSON.
cexp() { kubectl -n "$1" get cexp "$2" -o json; }
# field NS NAME PYEXPR: evaluate PYEXPR with `e` the experiment (dict), `s` its status; prints it.
field() {
  cexp "$1" "$2" | python3 -c '
import json, sys
e = json.load(sys.stdin); s = e.get("status") or {}
v = eval(sys.argv[1])
print(json.dumps(v) if isinstance(v, (dict, list)) else v)' "$3"
}
phase() { kubectl -n "$1" get cexp "$2" -o jsonpath='{.status.phase}' 2>/dev/null; }
phase_is() { [[ $(phase "$1" "$2") == "$3" ]]; }

# events NS NAME: "type reason: note" lines of the experiment's Events (both Event APIs).
events() {
  kubectl -n "$1" get events.events.k8s.io -o json | python3 -c '
import json, sys
name = sys.argv[1]
for ev in json.load(sys.stdin)["items"]:
    r = ev.get("regarding") or {}
    if r.get("kind") == "ConcurrencyExperiment" and r.get("name") == name:
        print(ev.get("type"), ev.get("reason") + ":", ev.get("note", ""))' "$2"
}
# Captured first: `events | grep -q` fails under pipefail when grep exits before python has
# printed every line (EPIPE), which made a present Event look missing.
has_event() {
  local all
  all=$(events "$1" "$2")
  grep -q " $3:" <<<"$all"
}

# deploy_env NS DEPLOY VAR: a container env var of the Deployment's first container.
deploy_env() {
  kubectl -n "$1" get deploy "$2" -o json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]
print(next((e.get("value", "") for e in c.get("env", []) if e["name"] == sys.argv[1]), ""))' "$3"
}

# prom QUERY: the first value of an instant query against $PROMETHEUS_URL (empty if none).
prom() {
  curl -sf --max-time 5 "$PROMETHEUS_URL/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}

# ready_pods NS SELECTOR: number of Ready pods matching the label selector.
ready_pods() {
  kubectl -n "$1" get pods -l "$2" -o json | python3 -c '
import json, sys
n = 0
for p in json.load(sys.stdin)["items"]:
    if p["metadata"].get("deletionTimestamp"): continue
    for c in (p.get("status") or {}).get("conditions", []):
        if c["type"] == "Ready" and c["status"] == "True": n += 1
print(n)'
}

# observed_split NS SECONDS: percent of requests answered by candidate pods over the last
# SECONDS, from the pods' own request counters in Prometheus ("-" when there were none).
observed_split() {
  local ns=$1 w=$2 c t
  c=$(prom "sum(increase(rails_requests_total{namespace=\"$ns\",pod=~\".*-candidate-.*\"}[${w}s]))")
  t=$(prom "sum(increase(rails_requests_total{namespace=\"$ns\"}[${w}s]))")
  python3 -c 'import sys
c = float(sys.argv[1] or 0); t = float(sys.argv[2] or 0)
print(round(100 * c / t) if t > 0 else "-")' "$c" "$t"
}

# split_within OBSERVED EXPECTED TOLERANCE WHAT: fails unless the observed split (percent, or
# "-" for no requests) is within TOLERANCE points of EXPECTED (WHAT names it in the failure).
split_within() {
  local observed=$1 expected=$2 tol=$3
  { [[ $observed != - ]] && (( observed - expected <= tol && expected - observed <= tol )); } \
    || fail "observed split ${observed}% is not within $tol points of $4 ${expected}%"
}

# kc ARGS...: the kubectl plugin (`kubectl concurrency`), built by the test tiers before
# (KUBECTL_CONCURRENCY overrides where it is).
kc() {
  local bin=${KUBECTL_CONCURRENCY:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/kubectl-concurrency}
  if [[ ! -x $bin ]]; then
    (cd "$ROOT" && cargo build -q --bin kubectl-concurrency) >&2 || return 1
    bin=${CARGO_TARGET_DIR:-$ROOT/target}/debug/kubectl-concurrency
  fi
  "$bin" "$@"
}
