# Shared settings for e2e/kind scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034
set -euo pipefail
[[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null && PATH="/usr/local/go/bin:$PATH"

KIND_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$KIND_HERE/../.." && pwd)"
CLUSTER_DIR="$REPO/e2e/cluster"
CACHE_ROOT="${CLUSTER_CACHE:-/var/cache/concurrency-operator}"
NAME=concurrency-e2e

# The local cluster's pins and binary cache (e2e/cluster/lib.sh computes them; read them in a
# subshell so its KUBECONFIG export does not leak into kind's scripts).
eval "$(bash -c 'source "$1/lib.sh"; printf "K8S_VERSION=%q BIN_DIR=%q TOOLS_DIR=%q PROM_BIN_DIR=%q\n" "$K8S_VERSION" "$BIN_DIR" "$TOOLS_DIR" "$PROM_BIN_DIR"' _ "$CLUSTER_DIR")"
TOOLS_HASH=$(basename "$(dirname "$BIN_DIR")"); TOOLS_HASH=${TOOLS_HASH##*-}

# kind CLI from its Go module (tools/).
KIND_TOOLS_DIR="$KIND_HERE/tools"
KIND_VERSION=$(awk '$1 == "sigs.k8s.io/kind" {print $2}' "$KIND_TOOLS_DIR/go.mod")
KIND_BIN_DIR="$CACHE_ROOT/kind-$KIND_VERSION-$(cat "$KIND_TOOLS_DIR/go.mod" "$KIND_TOOLS_DIR/go.sum" | sha256sum | cut -c1-12)/bin"
# kubeadm, built from e2e/cluster/tools' pins but in its own dir (a copy of that module), so
# the local cluster's cached build stays valid.
KUBEADM_DIR="$CACHE_ROOT/kubeadm-$K8S_VERSION-$TOOLS_HASH"
# Debian root filesystems (debootstrap) for the node and for images that need a userland.
ROOTFS_DIR="$CACHE_ROOT/kind-rootfs-v1"
NODE_PACKAGES="systemd systemd-sysv dbus containerd runc containernetworking-plugins conntrack iptables nftables iproute2 ethtool util-linux mount kmod libseccomp2 pigz e2fsprogs bash ca-certificates curl jq procps"
USERLAND_PACKAGES="iptables conntrack"

PATH="$KIND_BIN_DIR:$BIN_DIR:$PATH"
log() { printf '[kind %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
