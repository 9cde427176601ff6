# The gatewayAPI router's scenario (sourced by e2e/run).
# shellcheck shell=bash
# gatewayAPI router through a real data plane: Traefik (e2e/cluster/gateway: a host process on
# the bridge IP with its kubernetesGateway provider, which also installs the Gateway API CRDs
# it is built against) serves Gateway `shop-gateway` of class e2e-traefik, and the load pod
# sends every request through it (Service gateway.gateway-system), never the user's Service.
# At every stage the HTTPRoute's backendRef weights must equal the planned weight, and the
# split the pods observe (their own request counters) over a window that lies wholly inside
# the stage must be within E2E_SPLIT_TOLERANCE (15) points of the candidate's weight.

# route_weights NS: "baselineService=W candidateService=W" of the HTTPRoute's first rule.
route_weights() {
  kubectl -n "$1" get httproute storefront -o json | python3 -c '
import json, sys
refs = json.load(sys.stdin)["spec"]["rules"][0]["backendRefs"]
print(" ".join("%s=%s" % (r["name"], r.get("weight", 1)) for r in refs))'
}

# route_accepted NS: Traefik reports the HTTPRoute Accepted and its backendRefs resolved.
route_accepted() {
  kubectl -n "$1" get httproute storefront -o json | python3 -c '
import json, sys
parents = json.load(sys.stdin).get("status", {}).get("parents", [])
ok = lambda p, t: any(c["type"] == t and c["status"] == "True" for c in p.get("conditions", []))
sys.exit(0 if any(p.get("controllerName") == "traefik.io/gateway-controller"
                  and ok(p, "Accepted") and ok(p, "ResolvedRefs") for p in parents) else 1)'
}

scenario_gateway() {
  local ns=e2e-gateway seen="" measured="" w planned ph cur="" since=0 split
  local tol=${E2E_SPLIT_TOLERANCE:-15} win
  # The window ends before the stage does (stage length minus settling and polling slack).
  win=$(( ${E2E_STAGE_S:-25} - 12 )); (( win > 15 )) && win=15
  (( win >= 5 )) || fail "E2E_STAGE_S=${E2E_STAGE_S:-25} leaves no window to measure the split in"
  [[ -x $ROOT/e2e/cluster/gateway ]] || fail "no gateway data plane (e2e/cluster/gateway) for this cluster"
  "$ROOT/e2e/cluster/gateway" start >&2
  local GATEWAY_PORT GATEWAY_URL GATEWAY_HOST_URL
  eval "$("$ROOT/e2e/cluster/gateway" env)"
  new_ns $ns
  deploy_target $ns
  kubectl -n $ns apply -f - >/dev/null <<YAML
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shop-gateway}
spec:
  gatewayClassName: e2e-traefik
  listeners: [{name: http, protocol: HTTP, port: $GATEWAY_PORT, allowedRoutes: {namespaces: {from: Same}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: storefront}
spec:
  parentRefs: [{name: shop-gateway}]
  rules:
    - backendRefs: [{name: storefront, port: 80}]
YAML
  wait_until 60 "HTTPRoute accepted by the gateway" route_accepted $ns
  wait_until 30 "the gateway routes to the target" curl -sf --max-time 2 "$GATEWAY_HOST_URL/healthz"
  start_load $ns 240 "$E2E_RATE" / "$GATEWAY_URL"
  experiment $ns routed '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK" \
    '  traffic: {router: gatewayAPI, httpRoute: storefront}'
  while :; do
    ph=$(phase $ns routed || true)
    case $ph in Succeeded | RolledBack | Invalid) break ;; esac
    planned=$(kubectl -n $ns get cexp routed -o jsonpath='{.status.plannedWeight}' || true)
    w=$(route_weights $ns 2>/dev/null || true)
    if [[ $ph == Progressing && -n $planned && $seen != *"[$planned]"* && $w == *"storefront-candidate=$planned"* ]]; then
      log "  stage weight $planned: route $w"
      seen+="[$planned]" cur=$planned since=$(date +%s)
    fi
    # 5 s after the route changed (Traefik reloads, Prometheus scrapes), one window later, and
    # only while the weight is still in force.
    if [[ -n $cur && $measured != *"[$cur]"* && $w == *"storefront-candidate=$cur"* ]] \
      && (( $(date +%s) - since >= win + 5 )); then
      split=$(observed_split $ns "$win")
      log "  stage weight $cur: observed split through the gateway ${split}% candidate (last ${win} s)"
      split_within "$split" "$cur" "$tol" "the route's weight"
      measured+="[$cur]"
    fi
    sleep 1
  done
  [[ $ph == Succeeded ]] || fail "gateway experiment ended $ph"
  for planned in 30 70 100; do
    [[ $seen == *"[$planned]"* ]] || fail "never saw the route at candidate weight $planned (saw $seen)"
    [[ $measured == *"[$planned]"* ]] || fail "never measured the split at candidate weight $planned (measured $measured)"
  done
  [[ $(route_weights $ns) == storefront=* ]] || fail "route not restored to the user's Service: $(route_weights $ns)"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 4 ]] || fail "target does not have the candidate's threads"
  wait_until 60 "variant Services gone" bash -c "[[ \$(kubectl -n $ns get svc -o name | wc -l) == 1 ]]"
  no_rbac_denials
  stop_load $ns
}
