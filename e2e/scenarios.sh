# The end-to-end scenarios (sourced by e2e/run; the gateway one is in gateway.sh). Each runs
# under `set -e`: any failed command or assertion fails it.
# shellcheck shell=bash
LATENCY_CHECK='[{metric: latency, quantile: 0.9, maxIncrease: "50%", max: 250ms}, {metric: errorRate, max: "5%"}]'

# progress NS NAME: print stage, planned vs effective weight and the observed split while the
# experiment runs; returns when it reaches a final phase. Prints detection-to-rollback time.
progress() {
  local ns=$1 name=$2 last="" line ph t_fail="" eff last_eff="" t_eff=0 end=$(( $(date +%s) + ${E2E_PROGRESS_TIMEOUT_S:-300} ))
  while :; do
    [[ $(date +%s) -lt $end ]] || fail "$name: no final phase within ${E2E_PROGRESS_TIMEOUT_S:-300} s" || return 1
    ph=$(phase "$ns" "$name" || true)
    line=$(field "$ns" "$name" '"%s stage=%s planned=%s effective=%s verdict=%s failed=%s inconclusive=%s" % (s.get("phase"), s.get("stage"), s.get("plannedWeight"), s.get("effectiveWeight"), s.get("lastVerdict"), s.get("failedAnalyses"), s.get("inconclusiveAnalyses"))' || true)
    if [[ $line != "$last" ]]; then
      log "  $name: $line"
      last=$line
    fi
    # Planned vs observed split: when the effective weight changes, report the share of
    # requests the candidate's pods answered since the previous change.
    eff=$(kubectl -n "$ns" get cexp "$name" -o jsonpath='{.status.phase}:{.status.plannedWeight}/{.status.effectiveWeight}' 2>/dev/null || true)
    if [[ $eff != "$last_eff" ]]; then
      if [[ -n $last_eff && $(( $(date +%s) - t_eff )) -ge 8 ]]; then
        check_split "$ns" "$name" "$last_eff" $(( $(date +%s) - t_eff - 3 ))
      fi
      last_eff=$eff t_eff=$(date +%s)
    fi
    [[ -z $t_fail && $ph == RollingBack ]] && t_fail=$(date +%s)
    case $ph in Succeeded | RolledBack | Invalid) break ;; esac
    sleep 2
  done
  if [[ $ph == RolledBack ]]; then
    field "$ns" "$name" '"detection-to-rollback: decision at %s, RolledBack condition at %s" % ((s.get("decision") or {}).get("at"), next((c.get("lastTransitionTime") for c in s.get("conditions", []) if c["type"] == "RolledBack"), None))' >&2
  fi
}

# check_split NS NAME PHASE:PLANNED/EFFECTIVE WINDOW_S: prints the share of requests the
# candidate's pods answered over the window. With E2E_SPLIT_TOLERANCE (percentage points) set,
# a Progressing window of at least 10 s must match the effective weight within it (a slow
# candidate holds its connections longer and gets fewer requests, so rollback scenarios only
# print it).
check_split() {
  local ns=$1 name=$2 state=$3 w=$4 observed
  # Prometheus scrapes every 5 s: a shorter window holds at most one sample per pod and its
  # "split" would be noise (a 6 s rollback window once printed 0%).
  if (( w < 10 )); then
    log "  $name: split ${state} (phase:planned/effective) -> not measured, only $w s in force"
    return 0
  fi
  observed=$(observed_split "$ns" "$w")
  log "  $name: split ${state} (phase:planned/effective) -> observed ${observed}% over $w s"
  [[ -n ${E2E_SPLIT_TOLERANCE:-} && $state == Progressing:* && $observed != - ]] || return 0
  split_within "$observed" "${state##*/}" "$E2E_SPLIT_TOLERANCE" "$name: the effective weight"
}

# assert_baseline_restored NS: the target is back to Puma 2×6 with all its replicas, no candidate.
assert_baseline_restored() {
  local ns=$1
  [[ $(deploy_env "$ns" storefront RAILS_MAX_THREADS) == 6 ]] || fail "target's threads changed"
  [[ $(kubectl -n "$ns" get deploy storefront -o jsonpath='{.spec.replicas}') == "$E2E_REPLICAS" ]] \
    || fail "target's replicas not restored to $E2E_REPLICAS"
  wait_until 60 "candidate Deployment gone" bash -c "! kubectl -n $ns get deploy storefront-candidate"
}

# ---------------------------------------------------------------------------------------------
# rollback_with NS NAME CANDIDATE CHECKS CHECK_NAME: the candidate fails CHECK_NAME at the first
# stage; while rolling back, ready pods never drop below the baseline's replica count.
rollback_with() {
  local ns=$1 name=$2 candidate=$3 checks=$4 check=$5 min_ready=99 r
  experiment "$ns" "$name" "$candidate" "$checks"
  wait_until 60 "first stage reached" bash -c "[[ \$(kubectl -n $ns get cexp $name -o jsonpath='{.status.stageIndex}') == 0 ]]"
  progress "$ns" "$name" &
  local prog=$!
  # Serving capacity: ready pods behind the Service (baseline + candidate), sampled each second.
  while kill -0 $prog 2>/dev/null; do
    r=$(ready_pods "$ns" app=storefront)
    [[ $r -lt $min_ready ]] && min_ready=$r
    sleep 1
  done
  wait $prog
  [[ $(phase "$ns" "$name") == RolledBack ]] || fail "phase is $(phase "$ns" "$name"), not RolledBack"
  kubectl -n "$ns" wait --for=condition=RolledBack "cexp/$name" --timeout=10s >/dev/null
  [[ $min_ready -ge $E2E_REPLICAS ]] || fail "ready pods dropped to $min_ready (< $E2E_REPLICAS) during the experiment"
  log "  ready pods never below $min_ready (baseline $E2E_REPLICAS)"
  [[ $(field "$ns" "$name" 's["decision"]["action"]') == Rollback ]] || fail "decision is not Rollback"
  local failed
  # The deciding analysis (the last Fail), not the first failing check: an earlier analysis can
  # hold a check that failed on the candidate alone while the baseline had no samples yet
  # (that analysis was Inconclusive for too few baseline requests).
  failed=$(field "$ns" "$name" 'next((c for a in reversed(s["analyses"]) if a["verdict"] == "Fail" for c in a["checks"] if c["verdict"] == "Fail"), None)')
  log "  failed check: $failed"
  python3 -c 'import json,sys
c = json.loads(sys.argv[1]); assert c and c["name"] == sys.argv[2], c
assert c.get("baseline") is not None or sys.argv[2] == "gvlWait", "no baseline value"
assert c.get("candidate") is not None and c.get("limit"), "no candidate value or limit"' "$failed" "$check" \
    || fail "status does not name $check with both values and its limit"
  local message
  message=$(field "$ns" "$name" 's["decision"]["message"]')
  grep -q "$check" <<<"$message" || fail "decision message does not name $check"
  has_event "$ns" "$name" AnalysisFailed || fail "no AnalysisFailed Event"
  has_event "$ns" "$name" RolledBack || fail "no RolledBack Event"
  assert_baseline_restored "$ns"
}

scenario_rollback_latency() {
  local ns=e2e-latency
  new_ns $ns
  deploy_target $ns
  start_load $ns 180
  rollback_with $ns slow '{server: puma, workers: 2, threads: 4, env: [{name: EXTRA_LATENCY_MS, value: "200"}]}' "$LATENCY_CHECK" latency
  no_rbac_denials
  stop_load $ns
}

scenario_memory() {
  local ns=e2e-memory
  new_ns $ns
  deploy_target $ns
  start_load $ns 180
  # cAdvisor's working set is sampled only every ~30 s here, so the memory check needs an
  # interval at least that long or every analysis has no candidate value.
  E2E_INTERVAL_S=40 E2E_STAGE_S=45 \
    rollback_with $ns leak '{server: puma, workers: 2, threads: 6, env: [{name: MEMORY_GROWTH_KB_PER_REQUEST, value: "64"}]}' \
    '[{metric: memory, maxIncrease: "30%"}]' memory
  stop_load $ns
}

scenario_gvl_wait() {
  local ns=e2e-gvl
  new_ns $ns
  # CPU-bound requests: a single-loop falcon worker makes ready work wait for the loop
  # (measured here: falcon ~5% of request time, Puma 2×6 ~0%).
  E2E_CPU_MS=15 E2E_IO_MS=5 deploy_target $ns
  start_load $ns 180 20
  rollback_with $ns falcon '{server: falcon, workers: 1}' '[{metric: gvlWait, max: "2%"}]' gvlWait
  stop_load $ns
}

# Manual promotion: the experiment holds after its last stage until a person approves; the
# approve annotation is one-shot — the operator acts on it and removes it (a merge patch its
# RBAC must allow on the real apiserver).
scenario_approval() {
  local ns=e2e-approval
  new_ns $ns
  deploy_target $ns
  start_load $ns 240
  experiment $ns gated '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK" '  promotion: manual'
  wait_until 200 "holding for approval" bash -c "[[ \$(kubectl -n $ns get cexp gated -o jsonpath='{.status.phase}/{.status.holdReason}') == Paused/AwaitingApproval ]]"
  log "  holding: $(field $ns gated 's.get("message")')"
  sleep 10
  [[ $(phase $ns gated) == Paused ]] || fail "did not keep holding without approval: $(phase $ns gated)"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 6 ]] || fail "target changed before approval"
  [[ $(kubectl -n $ns get cexp gated -o jsonpath='{.status.plannedWeight}') == 100 ]] || fail "not at the last stage"
  kubectl -n $ns annotate cexp gated concurrency.dev/approve=true >/dev/null
  wait_until 90 "promoted after approval" phase_is $ns gated Succeeded
  wait_until 30 "approve annotation removed by the operator" \
    bash -c "[[ -z \$(kubectl -n $ns get cexp gated -o jsonpath='{.metadata.annotations.concurrency\.dev/approve}') ]]"
  [[ $(field $ns gated 's["decision"]["reason"]') == Approved ]] || fail "decision reason $(field $ns gated 's["decision"]["reason"]'), not Approved"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 4 ]] || fail "target does not have the candidate's threads"
  local n; n=$(events $ns gated | grep -c ' Promoting:' || true)
  [[ $n == 1 ]] || fail "$n Promoting Events (expected exactly 1)"
  no_rbac_denials
  stop_load $ns
}

scenario_deleted() {
  local ns=e2e-deleted
  new_ns $ns
  deploy_target $ns
  start_load $ns 120
  experiment $ns gone '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 90 "candidate ready in stage 1" bash -c "[[ \$(kubectl -n $ns get cexp gone -o jsonpath='{.status.stageIndex}') == 0 && \$(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.status.readyReplicas}') -ge 1 ]]"
  local tdel; tdel=$(date +%s)
  kubectl -n $ns delete cexp gone --timeout=60s >/dev/null
  assert_baseline_restored $ns
  kubectl -n $ns rollout status deploy/storefront --timeout=60s >/dev/null
  log "  deleted mid-flight: baseline restored in $(( $(date +%s) - tdel )) s"
  stop_load $ns
}

# blind_experiment NS NAME LOAD_S: the target under load and an experiment with
# inconclusiveLimit 2 (onInconclusive from E2E_ON_INCONCLUSIVE); once it is in its first stage,
# Prometheus is stopped. The caller must start it again whatever happens.
blind_experiment() {
  local ns=$1 name=$2
  [[ -x $ROOT/e2e/cluster/prometheus ]] || fail "cannot take Prometheus down on this cluster"
  new_ns "$ns"
  deploy_target "$ns"
  start_load "$ns" "$3"
  E2E_INCONCLUSIVE_LIMIT=2 experiment "$ns" "$name" '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 90 "first stage reached" bash -c "[[ \$(kubectl -n $ns get cexp $name -o jsonpath='{.status.stageIndex}') == 0 ]]"
  "$ROOT/e2e/cluster/prometheus" stop >&2
}

scenario_prometheus_down() {
  local ns=e2e-promdown
  blind_experiment $ns blind 180
  # Prometheus comes back whatever happens, or later scenarios would fail for the wrong reason.
  progress $ns blind || true
  "$ROOT/e2e/cluster/prometheus" start >&2
  [[ $(phase $ns blind) == RolledBack ]] || fail "phase $(phase $ns blind) with Prometheus down"
  [[ $(field $ns blind 's["decision"]["reason"]') == InconclusiveLimit ]] \
    || fail "decision reason $(field $ns blind 's["decision"]["reason"]'), not InconclusiveLimit"
  [[ $(field $ns blind 's.get("stageIndex")') == 0 ]] || fail "advanced past stage 1 without data"
  has_event $ns blind AnalysisInconclusive || fail "no AnalysisInconclusive Event"
  assert_baseline_restored $ns
  stop_load $ns
}

# Prometheus down with `onInconclusive: pause`: the experiment holds at its stage (never
# promotes, never rolls back by itself), keeps holding after Prometheus is back — a pause
# needs a person — and one approve annotation lifts it; then it runs to promotion.
scenario_prometheus_down_pause() {
  local ns=e2e-prompause
  E2E_ON_INCONCLUSIVE=pause blind_experiment $ns held 300
  # Prometheus comes back whatever happens, or later scenarios would fail for the wrong reason.
  if ! wait_until 120 "paused on inconclusive analyses" bash -c "[[ \$(kubectl -n $ns get cexp held -o jsonpath='{.status.phase}/{.status.holdReason}') == Paused/InconclusiveLimit ]]"; then
    "$ROOT/e2e/cluster/prometheus" start >&2
    fail "phase $(phase $ns held) with Prometheus down and onInconclusive: pause"
  fi
  log "  paused: $(field $ns held 's.get("message")')"
  "$ROOT/e2e/cluster/prometheus" start >&2
  sleep 25
  [[ $(phase $ns held) == Paused ]] || fail "the pause lifted itself: $(phase $ns held)"
  [[ $(field $ns held 's.get("stageIndex")') == 0 ]] || fail "advanced while paused"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 6 ]] || fail "target changed while paused"
  kubectl -n $ns annotate cexp held concurrency.dev/approve=true >/dev/null
  wait_until 30 "hold lifted" has_event $ns held HoldLifted
  wait_until 30 "approve annotation removed by the operator" \
    bash -c "[[ -z \$(kubectl -n $ns get cexp held -o jsonpath='{.metadata.annotations.concurrency\\.dev/approve}') ]]"
  progress $ns held
  [[ $(phase $ns held) == Succeeded ]] || fail "did not run to Succeeded after the approval: $(phase $ns held)"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 4 ]] || fail "target does not have the candidate's threads"
  stop_load $ns
}

# The operator is killed twice: mid-stage 2, and while promoting (the candidate starts slowly,
# so the target's rollout to the candidate config takes a while). Each time it resumes from
# status: no stage lost, no duplicate objects, every decision's Event exactly once.
scenario_operator_killed() {
  local ns=e2e-killed n
  new_ns $ns
  deploy_target $ns
  start_load $ns 300
  experiment $ns restart '{server: puma, workers: 2, threads: 4, env: [{name: SLOW_START_S, value: "4"}]}' "$LATENCY_CHECK"
  wait_until 150 "second stage reached" bash -c "[[ \$(kubectl -n $ns get cexp restart -o jsonpath='{.status.stageIndex}') == 1 ]]"
  kill_operator "mid-stage 2"
  [[ $(field $ns restart 's.get("stageIndex")') -ge 1 ]] || fail "stage lost"
  kubectl -n "$E2E_OP_NS" rollout status "deploy/$E2E_RELEASE-concurrency-operator" --timeout=120s >/dev/null
  wait_until 200 "promotion started" phase_is $ns restart Promoting
  log "  promoting: $(field $ns restart 's.get("message")')"
  kill_operator "during promotion"
  phase_is $ns restart Promoting || phase_is $ns restart Succeeded || fail "phase $(phase $ns restart) after the kill"
  kubectl -n "$E2E_OP_NS" rollout status "deploy/$E2E_RELEASE-concurrency-operator" --timeout=120s >/dev/null
  progress $ns restart
  [[ $(phase $ns restart) == Succeeded ]] || fail "did not resume to Succeeded"
  wait_until 60 "candidate Deployment gone" bash -c "! kubectl -n $ns get deploy storefront-candidate"
  [[ $(kubectl -n $ns get deploy -o name | wc -l) == 1 ]] || fail "duplicate Deployments: $(kubectl -n $ns get deploy -o name)"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 4 ]] || fail "target does not have the candidate's threads"
  [[ $(kubectl -n $ns get deploy storefront -o jsonpath='{.spec.replicas}') == "$E2E_REPLICAS" ]] || fail "target replicas changed"
  kubectl -n $ns rollout status deploy/storefront --timeout=60s >/dev/null
  for reason in Promoting Succeeded; do
    n=$(events $ns restart | grep -c " $reason:" || true)
    [[ $n == 1 ]] || fail "$n $reason Events (expected exactly 1)"
  done
  stop_load $ns
}

scenario_leader_failover() {
  local ns=e2e-leader holder t0 holder2
  install_operator --set replicaCount=2
  wait_until 60 "two ready operator pods" bash -c "[[ \$(kubectl -n $E2E_OP_NS get deploy $E2E_RELEASE-concurrency-operator -o jsonpath='{.status.readyReplicas}') == 2 ]]"
  new_ns $ns
  deploy_target $ns
  start_load $ns 240
  experiment $ns failover '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 120 "second stage reached" bash -c "[[ \$(kubectl -n $ns get cexp failover -o jsonpath='{.status.stageIndex}') == 1 ]]"
  holder=$(kubectl -n "$E2E_OP_NS" get lease "$E2E_RELEASE-concurrency-operator" -o jsonpath='{.spec.holderIdentity}')
  [[ -n $holder ]] || fail "no lease holder"
  # The identity is "<pod name>-<random suffix>".
  log "  killing the leader ${holder%-*} (identity $holder)"
  t0=$(date +%s)
  kubectl -n "$E2E_OP_NS" delete pod "${holder%-*}" --grace-period=0 --force >/dev/null 2>&1
  wait_until 60 "a new lease holder" bash -c "h=\$(kubectl -n $E2E_OP_NS get lease $E2E_RELEASE-concurrency-operator -o jsonpath='{.spec.holderIdentity}'); [[ -n \$h && \$h != $holder ]]"
  holder2=$(kubectl -n "$E2E_OP_NS" get lease "$E2E_RELEASE-concurrency-operator" -o jsonpath='{.spec.holderIdentity}')
  log "  leadership handed to $holder2 in $(( $(date +%s) - t0 )) s (lease 15 s)"
  progress $ns failover
  [[ $(phase $ns failover) == Succeeded ]] || fail "did not continue to Succeeded"
  [[ $(kubectl -n $ns get deploy -o name | wc -l) == 1 ]] || fail "duplicate Deployments"
  local n; n=$(events $ns failover | grep -c ' Succeeded:' || true)
  [[ $n == 1 ]] || fail "$n Succeeded Events (expected exactly 1)"
  stop_load $ns
  install_operator --set replicaCount=1
}
