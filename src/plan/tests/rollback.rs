//! Every way to roll back, and the order in which it restores the baseline.

use super::*;
use crate::api::{DecisionAction, Phase};

/// A run in stage 2 (70%, 2 + 4 pods in force) of a 6-replica target.
pub(super) fn in_stage_two(spec: ConcurrencyExperimentSpec) -> Run {
    let mut run = Run::new(spec, 6);
    run.tick(None);
    while run.status.stage_index != Some(1) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 5000);
    }
    run.log.clear();
    run
}

/// Drives a rollback with pods that take one extra tick to get ready; returns the actions.
fn finish_rollback(run: &mut Run) {
    run.auto_settle = false;
    for _ in 0..10 {
        if run.status.phase.is_terminal() {
            return;
        }
        run.now += 5;
        run.tick(None);
        run.world.settle();
    }
}

fn assert_restores_before_removing(run: &Run) {
    let scale = run
        .log
        .iter()
        .position(|a| *a == Action::ScaleTarget { replicas: 6 });
    let remove = run.log.iter().position(|a| *a == Action::RemoveCandidate);
    let (scale, remove) = (
        scale.expect("baseline restored"),
        remove.expect("candidate removed"),
    );
    assert!(scale < remove);
    assert_eq!(
        run.world.target.as_ref().unwrap().deployment.ready_replicas,
        6
    );
    assert!(run.world.candidate.is_none());
}

#[test]
fn failures_beyond_the_limit_roll_back_naming_the_check() {
    let mut run = in_stage_two(spec());
    run.advance(60, 1, Verdict::Fail);
    assert_eq!(
        run.status.phase,
        Phase::Progressing,
        "one failure is tolerated"
    );
    assert_eq!(run.events(), ["AnalysisFailed"]);
    run.advance(60, 1, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::RollingBack);
    assert_eq!(run.status.failed_analyses, 2);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(
        (d.action, d.reason.as_str()),
        (DecisionAction::Rollback, "CheckFailed")
    );
    for part in [
        "latency",
        "candidate 0.62",
        "baseline 0.41",
        "max 500ms",
        "failureLimit 1",
    ] {
        assert!(d.message.contains(part), "{part} missing in {}", d.message);
    }
    assert_eq!(
        run.events(),
        ["AnalysisFailed", "AnalysisFailed", "CheckFailed"]
    );
    finish_rollback(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_restores_before_removing(&run);
    assert_eq!(
        condition(&run.status, "RolledBack"),
        ("True".into(), "CheckFailed".into())
    );
    assert_eq!(condition(&run.status, "Succeeded").0, "False");
    assert_eq!(run.events().last().unwrap(), "RolledBack");
    assert_eq!(run.last.as_ref().unwrap().requeue_after, None);
}

#[test]
fn the_candidate_stays_until_the_baseline_is_ready_again() {
    let mut run = in_stage_two(spec());
    run.auto_settle = false;
    let out = run.tick_with(None, |o| o.abort_requested = true).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    assert!(out.actions.contains(&Action::ScaleTarget { replicas: 6 }));
    assert!(!out.actions.contains(&Action::RemoveCandidate));
    // Five of six baseline pods ready: still not.
    run.world.target.as_mut().unwrap().deployment.ready_replicas = 5;
    for _ in 0..3 {
        run.now += 5;
        let out = run.tick(None).clone();
        assert!(!out.actions.contains(&Action::RemoveCandidate));
        assert_eq!(out.requeue_after, Some(POLL));
    }
    run.world.settle();
    run.now += 5;
    assert_eq!(run.tick(None).actions, vec![Action::RemoveCandidate]);
    run.now += 5;
    assert_eq!(run.tick(None).status.phase, Phase::RolledBack);
}

#[test]
fn too_many_inconclusive_analyses_roll_back() {
    let mut run = in_stage_two(spec());
    run.advance(60, 3, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::Progressing);
    run.advance(60, 1, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::RollingBack);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, "InconclusiveLimit");
    assert!(
        d.message.contains("no data for the candidate"),
        "{}",
        d.message
    );
    finish_rollback(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_restores_before_removing(&run);
}

#[test]
fn too_many_inconclusive_analyses_pause_until_approved() {
    let mut run = in_stage_two(spec_with("").clone());
    run.spec.analysis.on_inconclusive = crate::api::InconclusiveAction::Pause;
    run.advance(60, 4, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    assert_eq!(condition(&run.status, "Progressing").1, "InconclusiveLimit");
    // More passes do not advance while held.
    run.advance(60, 20, Verdict::Pass);
    assert_eq!(
        (run.status.phase, run.status.stage_index),
        (Phase::Paused, Some(1))
    );
    assert_eq!(
        run.events()
            .iter()
            .filter(|e| *e == "InconclusiveLimit")
            .count(),
        1
    );
    // The approve annotation resets the count and resumes; the stage has earned its advance
    // by now.
    run.now += 5;
    run.world.approve_annotation = true;
    run.tick(None);
    assert_eq!(run.status.inconclusive_analyses, 0);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.stage_index, Some(2));
    assert!(run.events().contains(&"Resumed".to_string()));
}

#[test]
fn an_inconclusive_hold_can_be_aborted() {
    let mut run = in_stage_two(spec());
    run.spec.analysis.on_inconclusive = crate::api::InconclusiveAction::Pause;
    run.advance(60, 4, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::Paused);
    run.now += 5;
    run.tick_with(None, |o| o.abort_requested = true);
    assert_eq!(run.status.phase, Phase::RollingBack);
    assert_eq!(run.status.decision.clone().unwrap().reason, "Aborted");
    finish_rollback(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
}

#[test]
fn a_failure_while_paused_still_rolls_back() {
    let mut run = in_stage_two(spec());
    run.spec.paused = true;
    run.advance(60, 2, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn abort_in_pending_rolls_back_with_nothing_to_restore() {
    let mut run = Run::new(spec(), 6);
    let out = run.tick_with(None, |o| o.abort_requested = true).clone();
    assert_eq!(out.status.phase, Phase::RolledBack);
    assert_eq!(events(&out.actions), ["Aborted", "RolledBack"]);
    assert!(!out
        .actions
        .iter()
        .any(|a| !matches!(a, Action::Event { .. })));
}

#[test]
fn abort_mid_stage_restores_the_baseline_first() {
    let mut run = in_stage_two(spec());
    run.tick_with(None, |o| o.abort_requested = true);
    finish_rollback(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_restores_before_removing(&run);
    assert_eq!(run.events(), ["Aborted", "RolledBack"]);
}

#[test]
fn abort_is_ignored_once_promoting() {
    let spec = spec_with("stages: [{weight: 100, duration: 1m}]\n");
    let mut run = Run::new(spec, 2);
    run.auto_settle = false;
    run.tick(None);
    while run.status.phase != Phase::Promoting {
        run.world.settle();
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 1000);
    }
    run.now += 5;
    let out = run.tick_with(None, |o| o.abort_requested = true).clone();
    assert_eq!(out.status.phase, Phase::Promoting);
    assert!(events(&out.actions).is_empty());
}

#[test]
fn a_vanished_target_removes_the_candidate_at_once() {
    let mut run = in_stage_two(spec());
    run.world.target = None;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    assert_eq!(out.status.decision.unwrap().reason, "TargetMissing");
    assert!(out.actions.contains(&Action::RemoveCandidate));
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RolledBack);
    assert_eq!(events(&out.actions), ["RolledBack"]);
}

#[test]
fn gateway_rollback_restores_the_route_before_removing_the_candidate() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = in_stage_two(spec);
    assert_eq!(run.world.route_weight, 70);
    run.auto_settle = false;
    let out = run.tick_with(None, |o| o.abort_requested = true).clone();
    assert!(out.actions.contains(&Action::RestoreRoute));
    assert!(!out.actions.contains(&Action::RemoveCandidate));
    // The route is restored, but the Gateway may still send to the candidate for a moment:
    // its pods stay for scaleDownDelay (10 s by default) after the route change.
    run.now += 5;
    let held = run.tick(None).clone();
    assert!(held.actions.is_empty(), "{:?}", held.actions);
    assert!(held.requeue_after.unwrap() <= std::time::Duration::from_secs(5));
    let msg = held.status.message.unwrap();
    assert!(msg.contains("spec.traffic.scaleDownDelay"), "{msg}");
    run.now += 5;
    assert_eq!(run.tick(None).actions, vec![Action::RemoveCandidate]);
    run.now += 5;
    assert_eq!(run.tick(None).status.phase, Phase::RolledBack);
}

#[test]
fn scale_down_delay_is_the_specs_and_counts_from_the_last_route_change() {
    let spec =
        spec_with("traffic: {router: gatewayAPI, httpRoute: storefront, scaleDownDelay: 30s}\n");
    let mut run = in_stage_two(spec);
    run.auto_settle = false;
    run.tick_with(None, |o| o.abort_requested = true);
    // The route is seen restored at once, but RestoreRoute was asked again (a stale read):
    // the delay counts from that later change.
    run.now += 10;
    let again = run.tick_with(None, |o| o.effective_weight = 70).clone();
    assert!(again.actions.contains(&Action::RestoreRoute));
    run.now += 25;
    assert!(!run.tick(None).actions.contains(&Action::RemoveCandidate));
    run.now += 5;
    assert_eq!(run.tick(None).actions, vec![Action::RemoveCandidate]);
}
