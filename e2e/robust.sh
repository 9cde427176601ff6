# Off-the-happy-path scenarios (sourced by e2e/run): what real clusters do to a running
# experiment — a long last stage, a candidate that never gets ready, the target edited by a
# person, a user's object in the operator's way, Puma configured by flags, a retry. None of them
# depends on a measured split, so e2e/run runs them side by side, one namespace each.
# shellcheck shell=bash

# assert_target_intact NS REPLICAS: the target has REPLICAS replicas, all ready, and no candidate.
assert_target_intact() {
  local ns=$1 want=$2
  [[ $(kubectl -n "$ns" get deploy storefront -o jsonpath='{.spec.replicas}') == "$want" ]] \
    || fail "target at $(kubectl -n "$ns" get deploy storefront -o jsonpath='{.spec.replicas}') replicas, not $want"
  kubectl -n "$ns" rollout status deploy/storefront --timeout=90s >/dev/null || fail "target not rolled out"
  wait_until 60 "candidate Deployment gone" bash -c "! kubectl -n $ns get deploy storefront-candidate"
}

# decision_is NS NAME ACTION REASON: the experiment's decision.
decision_is() {
  local got
  got=$(field "$1" "$2" '"%s/%s" % ((s.get("decision") or {}).get("action"), (s.get("decision") or {}).get("reason"))')
  [[ $got == "$3/$4" ]] || fail "$2: decision $got, not $3/$4 ($(field "$1" "$2" 's.get("message")'))"
}

# examples/puma-to-falcon.yaml's shape (10/50/100, statistical, the last stage three times the
# others, 30 intervals long there), scaled down: 13 analyses at 100 % — more than the 10 the
# status keeps — and still the baseline reference of stage 2 judges every one of them.
scenario_long_last_stage() {
  local ns=e2e-longlast
  new_ns $ns
  deploy_target $ns
  start_load $ns 300
  kubectl -n $ns apply -f - >/dev/null <<EOF
apiVersion: concurrency.dev/v1alpha1
kind: ConcurrencyExperiment
metadata: {name: falcon}
spec:
  targetRef: {name: storefront}
  container: web
  candidate: {server: falcon, workers: 2}
  stages:
    - {weight: 10, duration: 25s}
    - {weight: 50, duration: 25s}
    - {weight: 100, duration: 135s}
  analysis:
    prometheus: {url: $E2E_PROM_IN_CLUSTER}
    interval: 10s
    failureLimit: 0
    inconclusiveLimit: 4
    minRequests: 10
    statistical: {alpha: 0.05, minSamples: 3}
    checks:
      - {metric: latency, quantile: 0.9, maxIncrease: "50%"}
      - {metric: errorRate, max: "5%"}
EOF
  E2E_PROGRESS_TIMEOUT_S=420 progress $ns falcon
  decision_is $ns falcon Promote StagesPassed
  # Every analysis the status still holds ran at 100 %, and each had a baseline value for the
  # maxIncrease check (the reference, not an empty slot).
  local at100
  at100=$(field $ns falcon 'sum(1 for a in s["analyses"] if a["weight"] == 100 and any(c["name"] == "latency" and c.get("baseline") is not None for c in a["checks"]))')
  [[ $at100 -ge 10 ]] || fail "only $at100 of the kept analyses ran at 100 % with a baseline value"
  [[ $(deploy_env $ns storefront SERVER) == falcon || $(field $ns falcon 's["baseline"]["summary"]') == "falcon 2 workers" ]] \
    || log "  note: target env SERVER=$(deploy_env $ns storefront SERVER)"
  assert_target_intact $ns "$E2E_REPLICAS"
  stop_load $ns
}

# A candidate that crash-loops (gvl-sim exits on a bad setting, as an app with a broken boot
# would): the stage's split is never in force, so the progress deadline rolls back, naming
# the pods' reason; the baseline never lost a pod.
scenario_never_ready() {
  local ns=e2e-neverready min_ready=99 r msg
  new_ns $ns
  deploy_target $ns
  experiment $ns broken '{server: puma, workers: 2, threads: 4, env: [{name: CPU_CLOCK, value: broken}]}' \
    "$LATENCY_CHECK" '  progressDeadline: 45s'
  local end=$(( $(date +%s) + 150 ))
  until phase_is $ns broken RolledBack; do
    [[ $(date +%s) -lt $end ]] || fail "not RolledBack within 150 s: $(field $ns broken 's.get("message")')"
    r=$(ready_pods $ns app=storefront)
    [[ $r -lt $min_ready ]] && min_ready=$r
    sleep 2
  done
  decision_is $ns broken Rollback ProgressDeadlineExceeded
  msg=$(field $ns broken 's["decision"]["message"]')
  log "  decision: $msg"
  grep -Eq 'CrashLoopBackOff|Error|exit' <<<"$msg" || fail "the decision does not say why the pods are not ready: $msg"
  has_event $ns broken ProgressDeadlineExceeded || fail "no ProgressDeadlineExceeded Event"
  [[ $min_ready -ge $E2E_REPLICAS ]] || fail "ready baseline pods dropped to $min_ready"
  assert_target_intact $ns "$E2E_REPLICAS"
}

# The target's pod template edited by a person mid-flight: its container renamed in stage 2,
# then (a second experiment) its env changed at 100 %, when the baseline runs 0 pods. Both roll
# back with TargetChanged, the target back at its original replicas, nothing promoted.
scenario_target_changed() {
  local ns=e2e-targetchanged
  new_ns $ns
  deploy_target $ns
  start_load $ns 400
  experiment $ns renamed '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 150 "second stage reached" bash -c "[[ \$(kubectl -n $ns get cexp renamed -o jsonpath='{.status.stageIndex}') == 1 ]]"
  kubectl -n $ns patch deploy storefront --type json \
    -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/name", "value": "app"}]' >/dev/null
  wait_until 120 "rolled back after the rename" phase_is $ns renamed RolledBack
  decision_is $ns renamed Rollback TargetChanged
  log "  renamed: $(field $ns renamed 's["decision"]["message"]')"
  assert_target_intact $ns "$E2E_REPLICAS"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 6 ]] || fail "the rolled-back target runs a config it did not have"
  kubectl -n $ns delete cexp renamed --wait=true --timeout=60s >/dev/null
  # The person's rename stays; put the container's name back for the next experiment.
  kubectl -n $ns patch deploy storefront --type json \
    -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/name", "value": "web"}]' >/dev/null
  kubectl -n $ns rollout status deploy/storefront --timeout=90s >/dev/null

  # At 100 % (the baseline scaled to 0): an env edit by a person.
  E2E_STAGE_S=40 experiment $ns at100 '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 200 "last stage in force" bash -c "[[ \$(kubectl -n $ns get cexp at100 -o jsonpath='{.status.effectiveWeight}') == 100 ]]"
  kubectl -n $ns set env deploy/storefront IO_MS=61 >/dev/null
  wait_until 120 "rolled back after the env edit" phase_is $ns at100 RolledBack
  decision_is $ns at100 Rollback TargetChanged
  log "  env edited at 100%: $(field $ns at100 's["decision"]["message"]')"
  assert_target_intact $ns "$E2E_REPLICAS"
  [[ $(deploy_env $ns storefront IO_MS) == 61 ]] || fail "the person's edit was undone"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 6 ]] || fail "promoted a template that was never judged"
  stop_load $ns
}

# A Deployment of the user's that happens to be named <target>-candidate: the experiment is
# Invalid, naming it, and the operator never patches or deletes it.
scenario_foreign_object() {
  local ns=e2e-foreign uid gen msg
  new_ns $ns
  deploy_target $ns
  kubectl -n $ns create deployment storefront-candidate --image="$E2E_APP_IMAGE" --replicas=0 >/dev/null
  uid=$(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.metadata.uid}')
  gen=$(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.metadata.generation}')
  experiment $ns intruder '{server: puma, workers: 2, threads: 4}' "$LATENCY_CHECK"
  wait_until 60 "Invalid" phase_is $ns intruder Invalid
  msg=$(field $ns intruder 's.get("message")')
  log "  invalid: $msg"
  grep -q 'storefront-candidate' <<<"$msg" || fail "the message does not name the Deployment in the way: $msg"
  has_event $ns intruder Invalid || fail "no Invalid Event"
  sleep 5
  kubectl -n $ns delete cexp intruder --wait=true --timeout=60s >/dev/null
  [[ $(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.metadata.uid}/{.metadata.generation}') == "$uid/$gen" ]] \
    || fail "the user's Deployment storefront-candidate was replaced or changed"
  [[ -z $(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.metadata.ownerReferences}') ]] \
    || fail "the operator adopted the user's Deployment"
  [[ $(kubectl -n $ns get deploy storefront -o jsonpath='{.spec.replicas}') == "$E2E_REPLICAS" ]] || fail "target scaled"
}

# Puma's concurrency in flags (`puma -w 2 -t 6:6`, as Procfiles do; gvl-sim honours the flags
# over the environment like Puma): the candidate must run 2×4, not inherit the baseline's flags.
scenario_puma_flags() {
  local ns=e2e-flags pod
  new_ns $ns
  E2E_ARGS='[serve, -w, "2", -t, "6:6"]' deploy_target $ns
  start_load $ns 240
  E2E_STAGE_S=15 experiment $ns flags '{server: puma, workers: 2, threads: 4}' "$TOLERANT_CHECK"
  wait_until 90 "candidate ready" bash -c "[[ \$(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.status.readyReplicas}') -ge 1 ]]"
  [[ $(field $ns flags 's["baseline"]["summary"]') == "puma 2×6" ]] || fail "baseline read back as $(field $ns flags 's["baseline"]["summary"]')"
  local args
  args=$(kubectl -n $ns get deploy storefront-candidate -o jsonpath='{.spec.template.spec.containers[0].args}')
  log "  candidate args: $args"
  pod=$(kubectl -n $ns get pods -o name | grep storefront-candidate | head -1)
  local podlog
  podlog=$(kubectl -n $ns logs "$pod")
  grep -q 'workers: 2, threads: 4,' <<<"$podlog" || fail "the candidate pod does not run 2×4: ${podlog:0:300}"
  progress $ns flags
  decision_is $ns flags Promote StagesPassed
  args=$(kubectl -n $ns get deploy storefront -o jsonpath='{.spec.template.spec.containers[0].args}')
  grep -q '4:4' <<<"$args" || fail "the promoted target's flags are $args"
  pod=$(kubectl -n $ns get pods -l app=storefront -o name | head -1)
  podlog=$(kubectl -n $ns logs "$pod")
  grep -q 'workers: 2, threads: 4,' <<<"$podlog" || fail "the promoted target does not run 2×4"
  stop_load $ns
}

# Rolled back (here: aborted at stage 1), then retried in place with the one-shot annotation:
# a fresh start at stage 1 that runs to promotion.
scenario_retry() {
  local ns=e2e-retry
  new_ns $ns
  deploy_target $ns
  start_load $ns 300
  E2E_STAGE_S=15 experiment $ns again '{server: puma, workers: 2, threads: 4}' "$TOLERANT_CHECK"
  wait_until 90 "first analysis" bash -c "[[ -n \$(kubectl -n $ns get cexp again -o jsonpath='{.status.lastVerdict}') ]]"
  # Through the kubectl plugin, as a person would: a refusal first (nothing to approve on an
  # auto experiment mid-stage, exit code 1, one line), then abort and retry.
  local out
  if out=$(kc -n $ns approve again 2>&1); then fail "approve mid-stage was accepted: $out"; fi
  grep -q 'nothing to approve' <<<"$out" || fail "approve refusal does not say why: $out"
  out=$(kc -n $ns get again) || fail "kubectl concurrency get failed"
  grep -q 'Phase: *Progressing' <<<"$out" || fail "get does not show the phase: $out"
  out=$(kc -n $ns abort again) || fail "kubectl concurrency abort failed: $out"
  grep -q 'abort requested' <<<"$out" || fail "abort: $out"
  wait_until 90 "rolled back" phase_is $ns again RolledBack
  decision_is $ns again Rollback Aborted
  out=$(kc -n $ns retry again) || fail "kubectl concurrency retry failed: $out"
  grep -q 'retry requested (concurrency.dev/retry=true)' <<<"$out" || fail "retry: $out"
  wait_until 60 "retried" bash -c "[[ \$(kubectl -n $ns get cexp again -o jsonpath='{.status.phase}') =~ ^(Pending|Progressing)$ ]]"
  wait_until 30 "retry annotation removed by the operator" \
    bash -c "[[ -z \$(kubectl -n $ns get cexp again -o jsonpath='{.metadata.annotations.concurrency\\.dev/retry}') ]]"
  has_event $ns again Retried || fail "no Retried Event"
  [[ $(field $ns again 's.get("failedAnalyses", 0) + s.get("inconclusiveAnalyses", 0)') == 0 ]] || fail "counters not reset"
  [[ $(field $ns again 's.get("decision")') == None ]] || fail "old decision kept: $(field $ns again 's.get("decision")')"
  progress $ns again
  decision_is $ns again Promote StagesPassed
  out=$(kc -n $ns history again) || fail "kubectl concurrency history failed"
  { grep -q 'analyses kept in status' <<<"$out" && grep -q 'Decision: Promote (StagesPassed)' <<<"$out"; } \
    || fail "history does not show the analyses and the decision: $out"
  [[ $(deploy_env $ns storefront RAILS_MAX_THREADS) == 4 ]] || fail "target does not have the candidate's threads"
  assert_target_intact $ns "$E2E_REPLICAS"
  stop_load $ns
}
