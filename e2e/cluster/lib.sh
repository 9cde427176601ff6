# Shared settings for e2e/cluster scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034  # the settings are used by the scripts that source this
set -euo pipefail

# Go from the official tarball may be installed without being on a non-login shell's PATH.
[[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null && PATH="/usr/local/go/bin:$PATH"

K8S_VERSION=v1.34.4
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOLS_DIR="$HERE/tools"
# Binaries survive `down` so a second `up` starts in seconds; keyed by the tools module's
# content so a pin change rebuilds.
CACHE_ROOT="${CLUSTER_CACHE:-/var/cache/concurrency-operator}"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION-$(cat "$TOOLS_DIR/go.mod" "$TOOLS_DIR/go.sum" "$TOOLS_DIR"/*/main.go | sha256sum | cut -c1-12)/bin"
PROM_TOOLS_DIR="$HERE/tools-prometheus"
PROM_MODULE_VERSION=$(grep -oE 'github.com/prometheus/prometheus v[0-9.]+' "$PROM_TOOLS_DIR/go.mod" | head -1 | cut -d' ' -f2)
PROM_BIN_DIR="$CACHE_ROOT/prometheus-$PROM_MODULE_VERSION-$(cat "$PROM_TOOLS_DIR/go.mod" "$PROM_TOOLS_DIR/go.sum" | sha256sum | cut -c1-12)/bin"
# Traefik, the Gateway API data plane (e2e/cluster/gateway), from its own module.
GW_TOOLS_DIR="$HERE/tools-gateway"
GW_MODULE_VERSION=$(grep -oE 'github.com/traefik/traefik/v3 v[0-9.]+' "$GW_TOOLS_DIR/go.mod" | head -1 | cut -d' ' -f2)
GW_BIN_DIR="$CACHE_ROOT/traefik-$GW_MODULE_VERSION-$(cat "$GW_TOOLS_DIR/go.mod" "$GW_TOOLS_DIR/go.sum" | sha256sum | cut -c1-12)/bin"
# metrics-server, for HorizontalPodAutoscalers (e2e/cluster/metrics), from its own module.
MS_TOOLS_DIR="$HERE/tools-metrics"
MS_MODULE_VERSION=$(grep -oE 'sigs.k8s.io/metrics-server v[0-9.]+' "$MS_TOOLS_DIR/go.mod" | head -1 | cut -d' ' -f2)
MS_BIN_DIR="$CACHE_ROOT/metrics-server-$MS_MODULE_VERSION-$(cat "$MS_TOOLS_DIR/go.mod" "$MS_TOOLS_DIR/go.sum" | sha256sum | cut -c1-12)/bin"
# Everything the running cluster owns lives here; `down` removes exactly this.
STATE="${CLUSTER_STATE:-/var/lib/concurrency-operator-cluster}"
PKI="$STATE/pki"
LOGS="$STATE/logs"
RUN="$STATE/run"

NODE_NAME=e2e-node
BRIDGE=cnio0
POD_CIDR=10.244.0.0/24
BRIDGE_IP=10.244.0.1
SERVICE_CIDR=10.96.0.0/24
KUBERNETES_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local

# Ports on loopback (and the bridge IP for the apiserver, which pods reach via the Service).
ETCD_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=6443
KCM_PORT=10257
SCHED_PORT=10259
KUBELET_PORT=10250
KUBELET_HEALTH_PORT=10248
PROXY_METRICS_PORT=10249
PROXY_HEALTH_PORT=10256
PROM_PORT=19090
# Traefik: HTTP entrypoint on the bridge IP (Gateway listeners use this port), ping on loopback.
GW_PORT=18080
GW_PING_PORT=18081
MS_PORT=18443
CONTAINERD_SOCK="$RUN/containerd/containerd.sock"

export KUBECONFIG="$STATE/admin.kubeconfig"

log() { printf '[cluster %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# build_lock NAME: hold an exclusive lock (until this script exits) for building NAME into the
# cache, so a build started in the background (e2e/prebuild) and the step that needs its result
# never build the same thing twice at once: the second waits, then finds it built.
build_lock() {
  local fd
  mkdir -p "$CACHE_ROOT/locks"
  exec {fd}>"$CACHE_ROOT/locks/$1.lock"
  flock "$fd"
}

kubectl() { "$BIN_DIR/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
