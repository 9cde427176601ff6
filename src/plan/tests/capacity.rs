//! The capacity gate before each weight step, and the replica granularity told at the start.
//!
//! Issue 15's run: a 1-replica target of Puma 2×4 under 20 req/s (2 ms CPU + 60 ms I/O per
//! request). The replicas router gives 1 + 1 pods (50%) at stages 1 and 2, then all 20 req/s
//! to the candidate's one pod. A Puma 1×1 candidate serves at most 1 / 62 ms ≈ 16.1 req/s:
//! 10 req/s at 50% is 62% of that, 20 req/s would be 124%.

use super::*;
use crate::api::{CapacityGate, DecisionAction, InconclusiveAction, Phase, ServerConfig};

/// The issue's spec: 1 replica, short stages, the given candidate and extra YAML.
fn issue_spec(candidate: &str, extra: &str) -> ConcurrencyExperimentSpec {
    let mut spec = spec_with(&format!(
        "stages: [{{weight: 30, duration: 2m}}, {{weight: 70, duration: 2m}}, \
         {{weight: 100, duration: 2m}}]\n{extra}"
    ));
    spec.candidate = Some(serde_yaml::from_str::<ServerConfig>(candidate).unwrap());
    spec
}

/// A 1-replica run measuring the issue's load.
fn issue_run(candidate: &str, extra: &str) -> Run {
    let mut run = Run::new(issue_spec(candidate, extra), 1);
    run.measurement = Some(measured(20.0));
    run.tick(None);
    run
}

/// Ticks every 30 s with passing analyses until the experiment finishes, holds, or `limit`.
fn walk(run: &mut Run, limit: usize) {
    for _ in 0..limit {
        if run.status.phase.is_terminal() || run.status.hold_reason.is_some() {
            return;
        }
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
}

fn scales(run: &Run) -> Vec<i32> {
    run.log
        .iter()
        .filter_map(|a| match a {
            Action::ScaleTarget { replicas } => Some(*replicas),
            _ => None,
        })
        .collect()
}

/// Analyses every minute until the gate writes `status.capacityGate`: without measurements,
/// when the current stage has earned its step and met the gate.
fn until_gate(run: &mut Run) {
    for _ in 0..30 {
        if run.status.capacity_gate.is_some() {
            return;
        }
        run.advance(60, 1, Verdict::Pass);
    }
    panic!("the gate was never met: {:?}", run.status.message);
}

fn gate(run: &Run) -> CapacityGate {
    run.status
        .capacity_gate
        .clone()
        .expect("status.capacityGate")
}

const ONE_BY_ONE: &str = "{server: puma, workers: 1, threads: 1}";
const TWO_BY_THREE: &str = "{server: puma, workers: 2, threads: 3}";

#[test]
fn issue_15_a_one_by_one_candidate_rolls_back_before_the_last_stage() {
    let mut run = issue_run(ONE_BY_ONE, "");
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let decision = run.status.decision.clone().unwrap();
    assert_eq!(
        (decision.action, decision.reason.as_str()),
        (DecisionAction::Rollback, INSUFFICIENT_CAPACITY)
    );
    // Decided from stage 2's data, before any traffic moved to stage 3: the target was never
    // scaled down (1 + 1 pods throughout), so it never went to 0.
    assert_eq!(run.status.stage.as_deref(), Some("2/3"));
    assert!(scales(&run).iter().all(|r| *r >= 1), "{:?}", scales(&run));
    assert_eq!(
        decision.message,
        "Rolling back before stage 3/3: Stage 3/3 would give the candidate 20.0 req/s per pod \
         (100% of 20.0 req/s on 1 pod); its estimated capacity is 16.1 req/s (puma 1×1, 2ms \
         CPU + 60ms I/O per request, bound threads): predicted utilization 124% > 85%."
    );
    let g = gate(&run);
    assert_eq!((g.stage.as_str(), g.stage_index), ("3/3", 2));
    assert_eq!(
        (g.weight, g.candidate_pods, g.verdict),
        (100, 1, Verdict::Fail)
    );
    assert_eq!(g.total_rate, Some(20.0));
    assert!((g.predicted_rate_per_pod.unwrap() - 20.0).abs() < 1e-9);
    assert!((g.capacity_per_pod.unwrap() - 1.0 / 0.062).abs() < 1e-9);
    assert!((g.predicted_utilization.unwrap() - 1.24).abs() < 1e-9);
    assert_eq!(g.max_utilization, 0.85);
    // The fixture's measurement names no source (status written before sources existed).
    assert_eq!(g.source, None);
    assert!(run.events().contains(&"StageAdvanced".to_string()));
    assert_eq!(message(&run.log, INSUFFICIENT_CAPACITY), decision.message);
}

#[test]
fn from_standard_metrics_the_gate_decides_alike_and_names_the_source() {
    // The same app without the GVL counters: the container's CPU and wall − CPU.
    let mut run = Run::new(issue_spec(ONE_BY_ONE, ""), 1);
    let mut m = measured(20.0);
    for v in [m.baseline.as_mut(), m.candidate.as_mut()]
        .into_iter()
        .flatten()
    {
        v.source = Some(crate::api::CapacitySource::StandardMetrics);
    }
    run.measurement = Some(m);
    run.tick(None);
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let decision = run.status.decision.clone().unwrap();
    assert_eq!(
        decision.message,
        "Rolling back before stage 3/3: Stage 3/3 would give the candidate 20.0 req/s per pod \
         (100% of 20.0 req/s on 1 pod); its estimated capacity is 16.1 req/s (puma 1×1, 2ms \
         CPU + 60ms I/O per request from standard metrics, bound threads): predicted \
         utilization 124% > 85%."
    );
    assert_eq!(
        gate(&run).source,
        Some(crate::api::CapacitySource::StandardMetrics)
    );
}

#[test]
fn issue_15_the_step_into_stage_2_passed_the_gate_at_50_percent() {
    let mut run = issue_run(ONE_BY_ONE, "");
    // Stage 1 at 1 + 1 pods: its step into stage 2 (also 50%) puts 10 req/s on the candidate.
    while run.status.analyses.is_empty() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    assert_eq!(run.status.stage_index, Some(0));
    let g = gate(&run);
    assert_eq!(
        (g.stage.as_str(), g.weight, g.verdict),
        ("2/3", 50, Verdict::Pass)
    );
    assert!((g.predicted_utilization.unwrap() - 0.62).abs() < 1e-9);
    assert!(
        g.message.contains(
            "(50% of 20.0 req/s on 1 pod — the replicas router gives 50% for the planned 70%)"
        ),
        "{}",
        g.message
    );
    assert!(
        run.status
            .message
            .clone()
            .unwrap()
            .ends_with("Capacity gate for stage 2/3: predicted utilization 62% (max 85%)."),
        "{:?}",
        run.status.message
    );
}

#[test]
fn issue_15_a_two_by_three_candidate_promotes() {
    let mut run = issue_run(TWO_BY_THREE, "");
    walk(&mut run, 100);
    assert_eq!(
        run.status.phase,
        Phase::Succeeded,
        "{:?}",
        run.status.message
    );
    let g = gate(&run);
    // The prediction the last stage was entered with: 20 req/s on one 2×3 pod (≈ 96.8 req/s).
    assert_eq!((g.stage.as_str(), g.verdict), ("3/3", Verdict::Pass));
    assert!((g.predicted_utilization.unwrap() - 20.0 * 0.062 / 6.0).abs() < 1e-9);
    assert!(
        g.message.contains("predicted utilization 21% ≤ 85%"),
        "{}",
        g.message
    );
}

#[test]
fn a_cpu_limit_caps_the_candidate() {
    let mut run = issue_run(TWO_BY_THREE, "");
    // 20 millicores: 0.02 / 2 ms = 10 req/s per pod, whatever the threads.
    run.world.candidate_cpu_limit = Some(0.02);
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let msg = run.status.decision.clone().unwrap().message;
    // Stage 2 (50%) is already 10 req/s on that pod: 100%.
    assert!(msg.starts_with("Rolling back before stage 2/3"), "{msg}");
    assert!(
        msg.contains("bound CPU limit): predicted utilization 100% > 85%"),
        "{msg}"
    );
}

#[test]
fn with_on_inconclusive_pause_the_gate_holds_until_approved() {
    let mut run = issue_run(ONE_BY_ONE, "");
    run.spec.analysis.on_inconclusive = InconclusiveAction::Pause;
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(INSUFFICIENT_CAPACITY)
    );
    assert_eq!(run.status.stage.as_deref(), Some("2/3"));
    assert_eq!(
        condition(&run.status, "Progressing").1,
        INSUFFICIENT_CAPACITY
    );
    let event = message(&run.log, INSUFFICIENT_CAPACITY);
    assert!(
        event.starts_with("Paused at stage 2/3: Stage 3/3 would give"),
        "{event}"
    );
    assert!(event.contains("124% > 85%"), "{event}");
    assert!(event.ends_with(
        "Annotate concurrency.dev/approve=true to take the step anyway, or abort to roll back."
    ));
    let status_msg = run.status.message.clone().unwrap();
    assert!(
        status_msg.starts_with("Paused (InsufficientCapacity). Stage 2/3"),
        "{status_msg}"
    );
    assert!(status_msg.contains("124% > 85%"), "{status_msg}");
    // Analyses go on; nothing steps, and the hold is not counted again.
    run.log.clear();
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.stage.as_deref(), Some("2/3"));
    assert!(run.events().is_empty(), "{:?}", run.events());
    // spec.approved approves promotions only.
    run.world.spec_approved = true;
    run.advance(60, 1, Verdict::Pass);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(INSUFFICIENT_CAPACITY)
    );
    run.world.spec_approved = false;
    // A fresh process resumes the hold from status alone.
    let json = serde_json::to_string(&run.status).unwrap();
    run.status = serde_json::from_str(&json).unwrap();
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Paused);
    assert!(run.events().is_empty(), "{:?}", run.events());
    // The annotation takes the step anyway, once, and is removed.
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage.as_deref(), Some("3/3"));
    assert_eq!(run.events(), ["HoldLifted", "Resumed", "StageAdvanced"]);
    assert!(message(&run.log, "HoldLifted").contains("stepping to stage 3/3 despite"));
    assert!(!run.world.approve_annotation);
    assert!(gate(&run).approved);
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::Succeeded);
}

#[test]
fn raising_the_limit_lifts_a_capacity_hold() {
    let mut run = issue_run(ONE_BY_ONE, "");
    run.spec.analysis.on_inconclusive = InconclusiveAction::Pause;
    walk(&mut run, 100);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(INSUFFICIENT_CAPACITY)
    );
    run.log.clear();
    run.spec.analysis.max_predicted_utilization = "130%".into();
    run.world.generation += 1;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.hold_reason, None);
    assert_eq!(run.status.stage.as_deref(), Some("3/3"));
    assert_eq!(run.events(), ["HoldLifted", "Resumed", "StageAdvanced"]);
    assert!(message(&run.log, "HoldLifted").contains("(130%) now allows the step to stage 3/3"));
}

/// The analyses pass their checks but the exporter has none of the counters.
fn unmeasured(extra: &str) -> Run {
    let mut run = Run::new(spec_with(extra), 6);
    run.measurement = None;
    run.tick(None);
    run
}

#[test]
fn without_measurements_the_step_waits_and_counts_as_inconclusive() {
    let mut run = unmeasured("");
    until_gate(&mut run);
    run.log.clear();
    run.advance(60, 1, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(0), "never a silent pass");
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.inconclusive_analyses, 2);
    assert_eq!(condition(&run.status, "Progressing").1, CAPACITY_UNKNOWN);
    let msg = run.status.message.clone().unwrap();
    assert!(
        msg.contains(
            "The capacity gate holds the step: Stage 2/3 cannot be predicted: Prometheus had no \
             CPU time per request (neither metrics.runningSeconds ruby_running_seconds_total nor \
             metrics.cpuUsage container_cpu_usage_seconds_total over metrics.requestsTotal \
             rails_requests_total), nor I/O time per request (neither metrics.ioWaitSeconds \
             ruby_io_wait_seconds_total nor metrics.requestDuration \
             rails_request_duration_seconds_sum / _count with the CPU), nor the total request \
             rate (metrics.requestsTotal rails_requests_total) for the candidate in stage 1/3; \
             set spec.analysis.maxPredictedUtilization: off if the app has neither."
        ),
        "{msg}"
    );
    let event = message(&run.log, "AnalysisInconclusive");
    assert!(
        event.starts_with(
            "Analysis in stage 1 at 33% weight was inconclusive (2 inconclusive, 3 tolerated): \
             its checks passed, but stage 2/3 cannot be predicted: Prometheus had no CPU time"
        ),
        "{event}"
    );
    // Beyond inconclusiveLimit 3 the usual handling rolls back.
    run.advance(60, 1, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Progressing);
    run.advance(60, 1, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::RollingBack);
    let decision = run.status.decision.clone().unwrap();
    assert_eq!(decision.reason, INCONCLUSIVE_LIMIT);
    assert!(
        decision.message.contains("stage 2/3 cannot be predicted"),
        "{}",
        decision.message
    );
}

#[test]
fn measurements_arriving_late_let_the_waiting_step_go() {
    let mut run = unmeasured("");
    until_gate(&mut run);
    assert_eq!(run.status.stage_index, Some(0));
    run.measurement = Some(measured(30.0));
    run.advance(60, 1, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(condition(&run.status, "Progressing").1, "Progressing");
}

#[test]
fn waiting_for_measurements_with_pause_holds_as_inconclusive() {
    let mut run = unmeasured("");
    run.spec.analysis.on_inconclusive = InconclusiveAction::Pause;
    until_gate(&mut run);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    assert_eq!(run.status.stage_index, Some(0));
}

#[test]
fn an_inconclusive_analysis_is_not_counted_twice() {
    let mut run = unmeasured("");
    until_gate(&mut run);
    assert_eq!(run.status.inconclusive_analyses, 1);
    // Prometheus down: the analysis itself is inconclusive, counted once by the analysis.
    run.advance(60, 1, Verdict::Inconclusive);
    assert_eq!(run.status.inconclusive_analyses, 2);
    // Ticks without a new analysis count nothing.
    for _ in 0..3 {
        run.now += 10;
        run.tick(None);
    }
    assert_eq!(run.status.inconclusive_analyses, 2);
}

#[test]
fn queueing_beyond_its_max_at_the_current_share_refuses_the_step() {
    let mut run = Run::new(
        spec_with("stages: [{weight: 30, duration: 2m}, {weight: 70, duration: 2m}, {weight: 100, duration: 2m}]\n"),
        6,
    );
    run.spec.analysis.failure_limit = 3;
    run.spec
        .analysis
        .checks
        .push(serde_yaml::from_str("{metric: queueTime, quantile: 0.9, max: 50ms}").unwrap());
    run.tick(None);
    let queue = |candidate: f64| CheckResult {
        name: "queueTime".into(),
        baseline: Some(0.004),
        candidate: Some(candidate),
        limit: "max 50ms".into(),
        verdict: if candidate > 0.05 {
            Verdict::Fail
        } else {
            Verdict::Pass
        },
        reason: None,
        evidence: None,
    };
    while run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(None);
    }
    // The first analysis of stage 1 queued 80 ms (a tolerated failure), the later ones passed.
    for _ in 0..8 {
        run.now += 30;
        let (v, q) = if run.status.analyses.is_empty() {
            (Verdict::Fail, 0.08)
        } else {
            (Verdict::Pass, 0.02)
        };
        run.tick_with(Some(v), |o| {
            if let Some(a) = o.analysis.as_mut() {
                a.record.checks.push(queue(q));
            }
        });
        if run.status.phase != Phase::Progressing {
            break;
        }
    }
    assert_eq!(
        run.status.phase,
        Phase::RollingBack,
        "{:?}",
        run.status.message
    );
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, INSUFFICIENT_CAPACITY);
    assert!(d.message.contains("predicted utilization 4% ≤ 85%; and the candidate already queued 80ms at 33% (queueTime max 50ms)."), "{}", d.message);
}

#[test]
fn gateway_api_predicts_the_exact_weight() {
    // One replica behind a route: stage 2 is 70% of 20 req/s on one 1×1 pod, 14 req/s: 87%.
    let mut run = issue_run(
        ONE_BY_ONE,
        "traffic: {router: gatewayAPI, httpRoute: storefront}\n",
    );
    assert!(!run.events().contains(&"CoarseSplit".to_string()));
    walk(&mut run, 100);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let d = run.status.decision.clone().unwrap();
    assert!(d.message.starts_with("Rolling back before stage 2/3: Stage 2/3 would give the candidate 14.0 req/s per pod (70% of 20.0 req/s on 1 pod);"), "{}", d.message);
    assert_eq!(run.status.planned_effective_weights, [30, 70, 100]);
}

#[test]
fn a_one_replica_target_is_told_its_coarse_split_once() {
    let run = issue_run(TWO_BY_THREE, "");
    assert_eq!(run.events(), ["Started", "CoarseSplit"]);
    assert_eq!(
        message(&run.log, "CoarseSplit"),
        "Deployment storefront has 1 replica: the replicas router splits traffic by pods, so \
         the candidate gets 50%, 50%, 100% for the planned 30%, 70%, 100%. For exact weights \
         use traffic.router: gatewayAPI, or run the target with more replicas."
    );
    assert_eq!(run.status.planned_effective_weights, [50, 50, 100]);
    // Rounding is not coarse: 2 of 6 pods for 30% says nothing, status still shows it.
    let mut six = Run::new(spec(), 6);
    six.tick(None);
    assert_eq!(six.events(), ["Started"]);
    assert_eq!(six.status.planned_effective_weights, [33, 67, 100]);
}

#[test]
fn the_gate_off_is_told_at_the_start_and_steps_on_the_checks() {
    let mut off = spec();
    off.analysis.max_predicted_utilization = "off".into();
    let mut run = Run::new(off, 6);
    run.measurement = None;
    run.tick(None);
    assert_eq!(run.events(), ["Started", CAPACITY_GATE_OFF]);
    assert!(message(&run.log, CAPACITY_GATE_OFF)
        .starts_with("The capacity gate is off (spec.analysis.maxPredictedUtilization is off)"));
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(run.status.capacity_gate, None);
    // A custom server has no capacity model.
    let mut custom = spec();
    custom.candidate = serde_yaml::from_str("{server: custom, args: [serve, --fast]}").unwrap();
    let mut run = Run::new(custom, 6);
    run.measurement = None;
    run.tick(None);
    assert!(message(&run.log, CAPACITY_GATE_OFF).contains("server: custom has no capacity model"));
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
}

#[test]
fn an_unknown_worker_count_names_the_field_to_set() {
    let mut run = Run::new(spec(), 6);
    run.spec.candidate = Some(serde_yaml::from_str("{server: puma, threads: 4}").unwrap());
    if let Some(t) = run.world.target.as_mut() {
        t.baseline = Some(RenderedServer {
            server: ServerKind::Puma,
            ..Default::default()
        });
    }
    run.tick(None);
    until_gate(&mut run);
    assert_eq!(run.status.stage_index, Some(0));
    let g = gate(&run);
    assert_eq!(g.verdict, Verdict::Inconclusive);
    assert_eq!(
        g.message,
        "Stage 2/3 cannot be predicted: the candidate's worker count is unknown (the target \
         does not say it either); set spec.candidate.workers."
    );
    // The target's count is used when the candidate leaves it out.
    let mut run = Run::new(spec(), 6);
    run.spec.candidate = Some(serde_yaml::from_str("{server: puma, threads: 4}").unwrap());
    run.tick(None);
    run.advance(60, 15, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(1));
    assert!(
        gate(&run).message.contains("(puma 2×4,"),
        "{}",
        gate(&run).message
    );
}

#[test]
fn a_zero_limit_is_invalid_and_names_the_field() {
    let mut run = Run::new(spec(), 6);
    run.spec.analysis.max_predicted_utilization = "0%".into();
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Invalid);
    let msg = run.status.message.clone().unwrap();
    assert!(
        msg.contains("spec.analysis.maxPredictedUtilization: \"0%\" must be more than 0% (or off, to turn the capacity gate off)"),
        "{msg}"
    );
}

/// docs/capacity.md's worked example from seed 003: an I/O share of 52% (say 24 ms CPU + 26 ms
/// I/O per request), 200 req/s on 4 pods of Puma 2×6, exact weights through an HTTPRoute.
fn seed_003(candidate: &str) -> Run {
    let mut spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    spec.candidate = Some(serde_yaml::from_str::<ServerConfig>(candidate).unwrap());
    let mut run = Run::new(spec, 4);
    let mut m = measured(200.0);
    for v in [m.baseline.as_mut(), m.candidate.as_mut()]
        .into_iter()
        .flatten()
    {
        v.cpu_per_request = Some(0.024);
        v.io_per_request = Some(0.026);
    }
    run.measurement = Some(m);
    run.tick(None);
    run
}

#[test]
fn seed_003_four_threads_carry_every_stage() {
    let mut run = seed_003("{server: puma, workers: 2, threads: 4}");
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    // GVL-bound at 4 threads as at 6: 2 / 24 ms = 83.3 req/s per pod; 50 req/s at 100%.
    let g = gate(&run);
    assert!(
        g.message.ends_with(
            "(100% of 200.0 req/s on 4 pods); its estimated capacity is 83.3 req/s (puma 2×4, \
             24ms CPU + 26ms I/O per request, bound GVL): predicted utilization 60% ≤ 85%."
        ),
        "{}",
        g.message
    );
}

#[test]
fn seed_003_halving_the_workers_is_refused_before_stage_2() {
    let mut run = seed_003("{server: puma, workers: 1, threads: 4}");
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(
        run.status.decision.clone().unwrap().message,
        "Rolling back before stage 2/3: Stage 2/3 would give the candidate 46.7 req/s per pod \
         (70% of 200.0 req/s on 3 pods); its estimated capacity is 41.7 req/s (puma 1×4, 24ms \
         CPU + 26ms I/O per request, bound GVL): predicted utilization 112% > 85%."
    );
}
