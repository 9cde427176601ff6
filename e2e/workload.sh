# The target workload, its load and the experiments of the end-to-end suite (sourced by e2e/run).
# shellcheck shell=bash
E2E_APP_IMAGE=${E2E_APP_IMAGE:-gvl-sim:e2e}
E2E_REPLICAS=${E2E_REPLICAS:-3}
# I/O-heavy requests: 2 ms CPU around 60 ms of I/O (seed 003's shape, scaled down).
E2E_CPU_MS=${E2E_CPU_MS:-2}
E2E_IO_MS=${E2E_IO_MS:-60}
E2E_RATE=${E2E_RATE:-30}

# new_ns NS: a fresh namespace for one scenario.
new_ns() {
  kubectl delete ns "$1" --ignore-not-found --wait=true --timeout=120s >/dev/null
  kubectl create ns "$1" >/dev/null
}

# deploy_target NS [EXTRA_ENV_YAML]: Deployment `storefront` (gvl-sim as Puma 2×6, scraped by
# Prometheus) behind Service `storefront`; waits until it is rolled out. E2E_ARGS: the
# container's args as a YAML flow list (e.g. Puma flags).
deploy_target() {
  local ns=$1 extra=${2:-}
  kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: storefront, labels: {app: storefront}}
spec:
  replicas: $E2E_REPLICAS
  selector: {matchLabels: {app: storefront}}
  template:
    metadata:
      labels: {app: storefront}
      annotations: {prometheus.io/scrape: "true", prometheus.io/port: "3000", prometheus.io/path: /metrics}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
        - name: web
          image: $E2E_APP_IMAGE
          imagePullPolicy: Never
${E2E_ARGS:+          args: $E2E_ARGS}
          ports: [{name: http, containerPort: 3000}]
          env:
            - {name: SERVER, value: puma}
            - {name: WEB_CONCURRENCY, value: "2"}
            - {name: RAILS_MAX_THREADS, value: "6"}
            - {name: CPU_MS, value: "$E2E_CPU_MS"}
            - {name: IO_MS, value: "$E2E_IO_MS"}
            - {name: CPU_CLOCK, value: wall}
$extra
          readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 1}
          resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: ${E2E_MEMORY_LIMIT:-256Mi}}}
---
apiVersion: v1
kind: Service
metadata: {name: storefront}
spec:
  selector: {app: storefront}
  ports: [{name: http, port: 80, targetPort: http}]
EOF
  kubectl -n "$ns" rollout status deploy/storefront --timeout=120s >/dev/null
}

# start_load NS SECONDS [RATE] [PATH] [BASE_URL]: an in-cluster pod sending open-model load to
# the Service's ClusterIP, or to BASE_URL (http://IP[:PORT], e.g. a gateway's; only that IP is
# allowed) for SECONDS (at most 600, gvl-sim's bound); returns once the load runs. kube-proxy
# picks a pod per connection, so connections are re-made every E2E_CONNECTION_AGE (as clients
# behind a load balancer do) or pods added later, the candidate's, would only see the
# connections broken by pods going away.
start_load() {
  local ns=$1 secs=$2 rate=${3:-$E2E_RATE} path=${4:-/} base=${5:-} ip
  if [[ -n $base ]]; then
    ip=${base#*://}; ip=${ip%%[:/]*}
  else
    ip=$(kubectl -n "$ns" get svc storefront -o jsonpath='{.spec.clusterIP}')
    base="http://$ip"
  fi
  kubectl -n "$ns" delete pod load --ignore-not-found --wait=true >/dev/null
  kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: load}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: load
      image: $E2E_APP_IMAGE
      imagePullPolicy: Never
      args: [load, --url, "$base$path", --rate, "$rate", --duration, "${secs}s",
             --connections, "64", --timeout, "5s", --allow-cidr, "$ip/32", --json,
             --max-connection-age, "${E2E_CONNECTION_AGE:-5s}"]
      resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 128Mi}}
EOF
  wait_until 60 "load pod running in $ns" bash -c "[[ \$(kubectl -n $ns get pod load -o jsonpath='{.status.phase}') == Running ]]" \
    || { kubectl -n "$ns" logs load >&2 || true; return 1; }
}
stop_load() { kubectl -n "$1" delete pod load --ignore-not-found --wait=false >/dev/null; }

# experiment NS NAME CANDIDATE_YAML CHECKS_YAML [EXTRA_SPEC_YAML]: apply an experiment with
# short stages (30/70/100) and intervals.
experiment() {
  local ns=$1 name=$2 candidate=$3 checks=$4 extra=${5:-}
  apply_experiment "$ns" "$name" "candidate: $candidate" "$checks" "$extra"
}

# selection_experiment NS NAME CANDIDATES_YAML SELECTION_YAML CHECKS_YAML: an experiment that
# chooses among CANDIDATES (docs/selection.md); the winner walks the same short stages.
selection_experiment() {
  local ns=$1 name=$2 candidates=$3 selection=$4 checks=$5
  apply_experiment "$ns" "$name" "candidates: $candidates
  selection: $selection" "$checks" ""
}

# apply_experiment NS NAME WHAT_YAML CHECKS_YAML EXTRA_SPEC_YAML: WHAT is the spec's
# `candidate:` or `candidates:` (and `selection:`) lines.
apply_experiment() {
  local ns=$1 name=$2 what=$3 checks=$4 extra=$5
  kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: concurrency.dev/v1alpha1
kind: ConcurrencyExperiment
metadata: {name: $name}
spec:
  targetRef: {name: storefront}
  container: web
  $what
  stages:
    - {weight: 30, duration: ${E2E_STAGE_S:-25}s}
    - {weight: 70, duration: ${E2E_STAGE_S:-25}s}
    - {weight: 100, duration: ${E2E_STAGE_S:-25}s}
  analysis:
    prometheus: {url: $E2E_PROM_IN_CLUSTER}
    interval: ${E2E_INTERVAL_S:-10}s
    failureLimit: 0
    inconclusiveLimit: ${E2E_INCONCLUSIVE_LIMIT:-4}
    onInconclusive: ${E2E_ON_INCONCLUSIVE:-rollback}
    minRequests: 10
    checks: $checks
$extra
EOF
}
