# What the benches read of the installed operator (sourced after e2e/lib.sh).
# shellcheck shell=bash
svc="$E2E_RELEASE-concurrency-operator-metrics"

operator_metrics() {
  kubectl get --raw "/api/v1/namespaces/$E2E_OP_NS/services/$svc:http-metrics/proxy/metrics"
}

# usage LABEL: operator CPU (1 m rate) and working set, from cAdvisor.
# Only the operator's running pods: the kubelet's cAdvisor goes on reporting a replaced pod's
# container for minutes (its last working set, frozen), and a max over both once showed the
# old pod's 39 MiB for a new pod at 11 MiB.
usage() {
  local pods mem cpu sel
  pods=$(kubectl -n "$E2E_OP_NS" get pods --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{end}')
  sel="namespace=\"$E2E_OP_NS\",container=\"operator\",pod=~\"${pods%|}\""
  mem=$(prom "max(container_memory_working_set_bytes{$sel})")
  cpu=$(prom "max(rate(container_cpu_usage_seconds_total{$sel}[1m]))")
  python3 -c 'import sys; print("  %-26s cpu %6.1f mCPU   memory %6.1f MiB" % (sys.argv[1], 1000*float(sys.argv[3] or 0), float(sys.argv[2] or 0)/2**20))' "$1" "$mem" "$cpu"
}


# waiting_target NAME REPLICAS: a Deployment whose pods cannot be scheduled (a nodeSelector no
# node matches), so an experiment on it makes its candidate and waits at stage 1 without pods.
waiting_target() {
  cat <<YAML
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      nodeSelector: {concurrency.dev/bench: nowhere}
      containers:
        - name: web
          image: gvl-sim:e2e
          env: [{name: WEB_CONCURRENCY, value: "2"}, {name: RAILS_MAX_THREADS, value: "6"}]
YAML
}

# waiting_experiment METADATA TARGET WHAT: an experiment (METADATA: its flow-style metadata
# fields, e.g. "name: exp-1") on TARGET with WHAT (its candidate or candidates lines), a 24 h
# progress deadline and one latency check.
waiting_experiment() {
  cat <<YAML
---
apiVersion: concurrency.dev/v1alpha1
kind: ConcurrencyExperiment
metadata: {$1}
spec:
  targetRef: {name: $2}
  $3
  progressDeadline: 24h
  analysis:
    prometheus: {url: $E2E_PROM_IN_CLUSTER}
    interval: 1m
    checks: [{metric: latency, max: 500ms}]
YAML
}
