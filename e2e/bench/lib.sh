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

