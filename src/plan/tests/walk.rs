//! Whole experiments, start to finish, and the properties that hold along the way.

use super::*;
use crate::api::{DecisionAction, Phase};

/// Ticks every 30 s with passing analyses until the experiment finishes (or `limit` ticks).
fn walk(run: &mut Run, limit: usize) {
    for _ in 0..limit {
        if run.status.phase.is_terminal() {
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

fn ensures(run: &Run) -> Vec<i32> {
    run.log
        .iter()
        .filter_map(|a| match a {
            Action::EnsureCandidate { replicas } => Some(*replicas),
            _ => None,
        })
        .collect()
}

#[test]
fn six_replicas_walk_30_70_100_to_succeeded() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(ensures(&run), vec![2, 4, 6]);
    // At 100% one baseline pod stays as a standby until an analysis there passed.
    assert_eq!(scales(&run), vec![4, 2, 1, 0, 6]);
    assert_eq!(run.count(|a| *a == Action::PromoteTarget), 1);
    assert_eq!(run.count(|a| *a == Action::RemoveCandidate), 1);
    assert_eq!(
        run.count(|a| matches!(a, Action::SetRouteWeights { .. })),
        0
    );
    assert_eq!(
        run.events(),
        [
            "Started",
            "StageAdvanced",
            "StageAdvanced",
            "StandbyReleased",
            "Promoting",
            "Succeeded"
        ]
    );
    assert_eq!(condition(&run.status, "Succeeded").0, "True");
    assert_eq!(condition(&run.status, "Progressing").0, "False");
    assert_eq!(condition(&run.status, "RolledBack").0, "False");
    let decision = run.status.decision.clone().unwrap();
    assert_eq!(
        (decision.action, decision.reason.as_str()),
        (DecisionAction::Promote, "StagesPassed")
    );
    assert!(run.world.target.as_ref().unwrap().runs_candidate_config);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 6);
    assert!(run.world.candidate.is_none());
    assert_eq!(run.last.as_ref().unwrap().requeue_after, None);
}

#[test]
fn serving_pods_never_drop_below_the_original_during_a_walk() {
    let mut run = Run::new(spec(), 6);
    // New pods are counted only after the check, so any premature scale-down would show.
    run.auto_settle = false;
    for _ in 0..400 {
        if run.status.phase.is_terminal() {
            break;
        }
        run.world.settle();
        run.now += 15;
        run.tick(Some(Verdict::Pass));
        let w = &run.world;
        let ready = w.target.as_ref().unwrap().deployment.ready_replicas
            + w.candidate.as_ref().map_or(0, |c| c.ready_replicas);
        assert!(
            ready >= 6,
            "only {ready} ready at {} in {:?}",
            run.now,
            run.status.phase
        );
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
}

#[test]
fn stage_status_shows_the_planned_and_effective_split() {
    let mut run = Run::new(spec(), 6);
    for _ in 0..3 {
        run.now += 5;
        run.tick(None);
    }
    let st = &run.status;
    assert_eq!(st.stage.as_deref(), Some("1/3"));
    assert_eq!(
        (st.stage_index, st.planned_weight, st.effective_weight),
        (Some(0), 30, 33)
    );
    assert_eq!(st.stage_started_at, Some(Time(at(15))));
    let c = st.candidate.as_ref().unwrap();
    assert_eq!(
        (c.deployment.as_str(), c.replicas, c.ready_replicas),
        ("storefront-candidate", 2, 2)
    );
    assert_eq!(c.summary, "puma 2×4");
    let b = st.baseline.as_ref().unwrap();
    assert_eq!(
        (b.deployment.as_str(), b.replicas, b.ready_replicas),
        ("storefront", 4, 4)
    );
    assert_eq!(b.summary, "puma 2×6");
    assert_eq!(st.original.as_ref().unwrap().replicas, 6);
}

#[test]
fn a_one_replica_target_runs_one_plus_one_then_hands_over() {
    let mut run = Run::new(spec(), 1);
    run.tick(None);
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(ensures(&run), vec![1]);
    // The baseline keeps its pod at 30% and 70%; it goes only at 100% and comes back promoted.
    assert_eq!(scales(&run), vec![0, 1]);
    assert_eq!(
        run.events()
            .iter()
            .filter(|e| *e == "StageAdvanced")
            .count(),
        2
    );
}

#[test]
fn gateway_api_walk_shifts_route_weights_and_keeps_the_baseline() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 4);
    run.tick(None);
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    let weights: Vec<i32> = run
        .log
        .iter()
        .filter_map(|a| match a {
            Action::SetRouteWeights {
                candidate_weight, ..
            } => Some(*candidate_weight),
            _ => None,
        })
        .collect();
    assert_eq!(weights, vec![30, 70, 100]);
    assert_eq!(ensures(&run), vec![2, 3, 4]);
    assert!(scales(&run).is_empty());
    assert_eq!(run.count(|a| *a == Action::RestoreRoute), 1);
    // The route is restored before the candidate goes.
    let pos = |x: &Action| run.log.iter().position(|a| a == x).unwrap();
    assert!(pos(&Action::RestoreRoute) < pos(&Action::RemoveCandidate));
    assert!(pos(&Action::PromoteTarget) < pos(&Action::RestoreRoute));
}

#[test]
fn replaying_the_same_observations_changes_nothing() {
    let mut run = Run::new(spec(), 6);
    run.spec.analysis.inconclusive_limit = 100;
    for i in 0..120 {
        if run.status.phase.is_terminal() {
            break;
        }
        run.now += 30;
        let mut obs = run.obs();
        if analysis_due(&run.spec, &run.status, obs.now) {
            let stage = run.status.stage_index.unwrap_or(0);
            let v = if i % 7 == 3 {
                Verdict::Inconclusive
            } else {
                Verdict::Pass
            };
            obs.analysis = Some(AnalysisOutcome {
                record: record(v, run.now, stage, obs.effective_weight),
                recommendation: None,
                no_data: false,
                queries: Default::default(),
            });
        }
        let first = step(&run.spec, &run.status, &obs);
        let again = step(&run.spec, &first.status, &obs);
        assert!(
            events(&again.actions).is_empty(),
            "replay at {} emitted {:?}",
            run.now,
            again.actions
        );
        assert_eq!(
            again.status, first.status,
            "replay at {} changed status",
            run.now
        );
        run.world.apply(&first.actions);
        run.world.settle();
        run.status = first.status;
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
}

#[test]
fn a_restarted_operator_resumes_from_status_alone() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    walk(&mut run, 25); // into stage 2
    assert_eq!(run.status.stage_index, Some(1));
    let started = run.status.stage_started_at.clone();
    assert!(started.is_some());
    // A fresh process: status read back from the API server, the same cluster.
    let json = serde_json::to_string(&run.status).unwrap();
    run.status = serde_json::from_str(&json).unwrap();
    run.log.clear();
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.status.stage_started_at, started);
    assert!(run.events().is_empty(), "{:?}", run.log);
    assert!(!run.log.iter().any(|a| matches!(
        a,
        Action::EnsureCandidate { .. } | Action::ScaleTarget { .. }
    )));
    walk(&mut run, 200);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(ensures(&run), vec![6]);
    assert_eq!(scales(&run), vec![1, 0, 6]);
}

#[test]
fn restart_right_after_starting_keeps_the_recorded_original() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.now += 5;
    run.tick(None); // the target is scaled to 4
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 4);
    // The status write of a later step was lost; the original stays 6 and stage 1 goes on.
    let st = run.status.clone();
    run.now += 5;
    let out = step(&run.spec, &st, &run.obs());
    assert_eq!(out.status.original.as_ref().unwrap().replicas, 6);
    assert_eq!(out.status.stage_index, Some(0));
    assert!(events(&out.actions).is_empty());
}
