# The operator as users install it: the Helm chart with the local image (sourced by e2e/run
# and e2e/demo).
# shellcheck shell=bash
CHART=${CHART:-$ROOT/charts/concurrency-operator}

# install_operator [HELM_ARGS...]: helm install (or upgrade) the chart with the local image;
# waits for Ready (the readiness probe is /readyz) and checks the CRD is there.
install_operator() {
  # The tag stays `e2e`; a pod annotation with the image's digest rolls the pods when it changes.
  local digest
  digest=$(e2e_image_digest concurrency-operator:e2e)
  # Helm installs crds/ only on first install and never upgrades them (docs/operations.md):
  # apply the chart's CRD as an upgrade would, so a cluster kept from an older run is current.
  kubectl apply --server-side --force-conflicts --field-manager=e2e -f "$CHART/crds/" >/dev/null
  helm upgrade --install "$E2E_RELEASE" "$CHART" -n "$E2E_OP_NS" --create-namespace \
    --set image.repository=concurrency-operator --set image.tag=e2e --set image.pullPolicy=Never \
    --set logFormat=text --set-string "podAnnotations.e2e/image=$digest" "$@" --wait --timeout 120s >/dev/null
  kubectl -n "$E2E_OP_NS" rollout status "deploy/$E2E_RELEASE-concurrency-operator" --timeout=120s >/dev/null
  kubectl get crd concurrencyexperiments.concurrency.dev >/dev/null
}
# e2e_image_digest REF: the image's digest in the local cluster's containerd ("" elsewhere).
e2e_image_digest() {
  [[ -n ${CONTAINERD_ADDRESS:-} ]] || return 0
  ctr --address "$CONTAINERD_ADDRESS" -n k8s.io images ls 2>/dev/null \
    | awk -v r="docker.io/library/$1" '$1 == r {print substr($3, 8, 12)}'
}
uninstall_operator() {
  helm uninstall "$E2E_RELEASE" -n "$E2E_OP_NS" --wait --timeout 60s >/dev/null
  local left
  left=$(kubectl get clusterrole,clusterrolebinding -o name | grep -c "$E2E_RELEASE-concurrency-operator" || true)
  [[ $left == 0 ]] || { fail "helm uninstall left $left cluster RBAC objects"; return 1; }
  left=$(kubectl -n "$E2E_OP_NS" get deploy,sa,role,rolebinding,svc -o name | grep -vx serviceaccount/default || true)
  [[ -z $left ]] || { fail "helm uninstall left in $E2E_OP_NS: $left"; return 1; }
  log "helm uninstall: no operator objects left (the CRD stays, as Helm does with crds/)"
}
