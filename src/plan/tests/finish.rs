//! Promotion, deletion at every phase, invalid specs and terminal phases.

use super::*;
use crate::api::Phase;

/// Ticks with passing analyses until `phase` is reached.
fn until(run: &mut Run, phase: Phase) {
    while run.status.phase != phase {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(
            run.now < 10_000,
            "never reached {phase:?}: {:?}",
            run.status.phase
        );
    }
}

fn deleting(o: &mut Observations) {
    o.deleting_since = Some(o.now);
}

/// 6 replicas, at stage 1 after passing analyses (the target scaled down for the candidate).
fn at_stage_one() -> Run {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.advance(60, 12, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(1));
    run
}

/// [`at_stage_one`], pods no longer getting ready by themselves; with the target's ready
/// count, below its original 6.
fn at_stage_one_with_the_baseline_short() -> (Run, i32) {
    let mut run = at_stage_one();
    run.auto_settle = false;
    let ready = run.world.target.as_ref().unwrap().deployment.ready_replicas;
    assert!(ready < 6);
    (run, ready)
}

/// Deletes mid-flight with pods slow to get ready; checks the restore order and the release.
fn delete_and_check(run: &mut Run) {
    run.auto_settle = false;
    run.log.clear();
    let mut released = false;
    for _ in 0..10 {
        run.now += 5;
        let out = run.tick_with(None, deleting).clone();
        run.world.settle();
        if out.release_finalizer {
            released = true;
            break;
        }
    }
    assert!(released, "{:?}", run.log);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let t = &run.world.target.as_ref().unwrap().deployment;
    assert_eq!((t.replicas, t.ready_replicas), (6, 6));
    assert!(run.world.candidate.is_none());
    let remove = run
        .log
        .iter()
        .position(|a| *a == Action::RemoveCandidate)
        .unwrap();
    if let Some(scale) = run
        .log
        .iter()
        .position(|a| *a == Action::ScaleTarget { replicas: 6 })
    {
        assert!(scale < remove);
    }
    assert_eq!(run.events().first().map(String::as_str), Some("Deleted"));
}

#[test]
fn promotion_waits_for_the_rolled_out_target_before_removing_the_candidate() {
    let spec = spec_with("stages: [{weight: 50, duration: 1m}, {weight: 100, duration: 1m}]\n");
    let mut run = Run::new(spec, 6);
    run.tick(None);
    until(&mut run, Phase::Promoting);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 6);
    // Not rolled out yet: the candidate keeps serving.
    let t = &mut run.world.target.as_mut().unwrap().deployment;
    t.rolled_out = false;
    t.ready_replicas = 3;
    run.auto_settle = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert!(!out.actions.contains(&Action::RemoveCandidate));
    assert_eq!(out.requeue_after, Some(POLL));
    run.world.settle();
    run.now += 5;
    assert_eq!(run.tick(None).actions, vec![Action::RemoveCandidate]);
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Succeeded);
    assert_eq!(events(&out.actions), ["Succeeded"]);
}

#[test]
fn promotion_needs_the_candidate_config_in_the_target() {
    let spec = spec_with("stages: [{weight: 100, duration: 1m}]\n");
    let mut run = Run::new(spec, 2);
    run.tick(None);
    until(&mut run, Phase::Promoting);
    // A failed patch left the old template in place (someone else's template: see target.rs).
    let t = run.world.target.as_mut().unwrap();
    t.runs_candidate_config = false;
    t.template_hash = TEMPLATE.into();
    run.now += 5;
    let out = run.tick_with(None, |_| {}).clone();
    assert!(out.actions.contains(&Action::PromoteTarget));
    assert!(!out.actions.contains(&Action::RemoveCandidate));
}

#[test]
fn deleting_a_pending_or_finished_experiment_releases_at_once() {
    let mut run = Run::new(spec(), 6);
    let out = run.tick_with(None, deleting).clone();
    assert!(out.release_finalizer);
    assert!(out.actions.is_empty());
    for phase in [Phase::Succeeded, Phase::RolledBack, Phase::Invalid] {
        let st = ConcurrencyExperimentStatus {
            phase,
            ..Default::default()
        };
        let mut obs = run.obs();
        obs.deleting_since = Some(obs.now);
        let out = step(&run.spec, &st, &obs);
        assert!(out.release_finalizer, "{phase:?}");
        assert!(out.actions.is_empty(), "{phase:?}");
        assert_eq!(out.status.phase, phase);
    }
}

#[test]
fn deleting_mid_stage_restores_the_baseline_then_releases() {
    let mut run = at_stage_one();
    delete_and_check(&mut run);
}

/// Right after the start the candidate has no ready pod and the target was never touched:
/// released in the first reconcile, nothing scaled (the candidate goes with the experiment).
#[test]
fn deleting_right_after_the_start_releases_at_once() {
    let mut run = Run::new(spec(), 6);
    run.auto_settle = false;
    run.tick(None); // candidate asked for, not ready, target untouched
    run.log.clear();
    run.now += 5;
    let out = run.tick_with(None, deleting).clone();
    assert!(out.release_finalizer, "{:?}", out.actions);
    assert!(!run
        .log
        .iter()
        .any(|a| matches!(a, Action::ScaleTarget { .. })));
    let t = &run.world.target.as_ref().unwrap().deployment;
    assert_eq!((t.replicas, t.ready_replicas), (6, 6));
}

/// A baseline that can never get ready again (its pods unschedulable) holds the deletion for
/// `spec.progressDeadline` (10m) from the deletion timestamp, keeping the candidate serving;
/// then the finalizer is released with a Warning naming the ready count — and the candidate's
/// ready pods are never removed with it: they are let go of and keep serving.
#[test]
fn deleting_with_a_baseline_that_cannot_get_ready_gives_up_after_the_progress_deadline() {
    let (mut run, ready) = at_stage_one_with_the_baseline_short();
    let since = at(run.now);
    let stuck = |o: &mut Observations| o.deleting_since = Some(since);
    run.log.clear();
    let start = run.now;
    while run.now + 30 < start + 600 {
        run.now += 30;
        let out = run.tick_with(None, stuck).clone();
        // The target's new pods never get ready.
        let t = &mut run.world.target.as_mut().unwrap().deployment;
        t.ready_replicas = ready;
        assert!(!out.release_finalizer, "released at +{} s", run.now - start);
        // Looked at again by the deadline at the latest.
        let due = out.requeue_after.map(|d| run.now + d.as_secs() as i64);
        assert!(due.is_some_and(|due| due <= start + 600), "{due:?}");
    }
    assert!(!run.log.contains(&Action::RemoveCandidate), "{:?}", run.log);
    run.now = start + 600;
    let out = run.tick_with(None, stuck).clone();
    assert!(out.release_finalizer);
    let msg = out.status.message.clone().unwrap();
    assert!(msg.contains(&format!("{ready} of 6 pods ready")), "{msg}");
    assert!(
        msg.contains("keep serving: Deployment storefront-candidate"),
        "{msg}"
    );
    assert!(events(&out.actions).contains(&"BaselineNotRestored".to_string()));
    // Let go of, not removed: nothing serving goes with the experiment.
    assert!(
        out.actions.contains(&Action::KeepServing),
        "{:?}",
        out.actions
    );
    assert!(
        !out.actions.contains(&Action::RemoveCandidate),
        "{:?}",
        out.actions
    );
}

/// The candidate serves nothing (its pods crash-looping since stage 2 began) and the target,
/// scaled down for stage 1, cannot get ready again: no traffic depends on the candidate, so
/// the deletion asks for the target's size and releases at once, not after the deadline.
#[test]
fn deleting_with_a_candidate_that_serves_nothing_releases_at_once() {
    let (mut run, ready) = at_stage_one_with_the_baseline_short();
    run.world.candidate.as_mut().unwrap().ready_replicas = 0;
    run.log.clear();
    run.now += 5;
    let out = run.tick_with(None, deleting).clone();
    assert!(out.release_finalizer, "{:?}", out.actions);
    assert!(
        out.actions.contains(&Action::ScaleTarget { replicas: 6 }),
        "{:?}",
        out.actions
    );
    let msg = out.status.message.clone().unwrap();
    assert!(
        msg.contains(&format!("back at 6 pods ({ready} ready)")),
        "{msg}"
    );
    assert!(!events(&out.actions).contains(&"BaselineNotRestored".to_string()));
}

/// A target that is itself being deleted (its namespace going) has no baseline to restore:
/// the candidate goes and the finalizer is released at once, not after the deadline.
#[test]
fn deleting_with_the_target_being_deleted_releases_at_once() {
    let mut run = at_stage_one();
    run.auto_settle = false;
    run.world.target.as_mut().unwrap().deleting = true;
    run.log.clear();
    let mut released = false;
    for _ in 0..4 {
        run.now += 5;
        let out = run.tick_with(None, deleting).clone();
        run.world.settle();
        if out.release_finalizer {
            released = true;
            break;
        }
    }
    assert!(released, "{:?}", run.log);
    assert!(run.log.contains(&Action::RemoveCandidate));
    assert!(!run
        .log
        .iter()
        .any(|a| matches!(a, Action::ScaleTarget { .. })));
}

/// The namespace itself is being deleted: its controller deletes the target and the route
/// with the experiment, so nothing is restored and no status or Event is written.
#[test]
fn deleting_in_a_terminating_namespace_releases_at_once() {
    let mut run = at_stage_one();
    let before = run.status.clone();
    let out = run
        .tick_with(None, |o| {
            o.deleting_since = Some(o.now);
            o.namespace_terminating = true;
            // The deletion bumps the generation; the status is left as stored all the same.
            o.generation += 1;
        })
        .clone();
    assert!(out.release_finalizer);
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(out.status, before);
}

#[test]
fn deleting_while_paused_restores_the_baseline() {
    let mut run = Run::new(spec(), 6);
    run.spec.paused = true;
    run.tick(None);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    delete_and_check(&mut run);
}

#[test]
fn deleting_while_promoting_scales_back_then_releases() {
    let mut run = Run::new(spec_with("stages: [{weight: 100, duration: 1m}]\n"), 6);
    run.auto_settle = false;
    run.tick(None);
    while run.status.phase != Phase::Promoting {
        run.world.settle();
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    delete_and_check(&mut run);
}

#[test]
fn deleting_while_rolling_back_finishes_the_rollback() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.advance(60, 2, Verdict::Pass);
    run.auto_settle = false;
    run.tick_with(None, |o| o.abort_requested = true);
    run.log.clear();
    run.now += 5;
    let out = run.tick_with(None, deleting).clone();
    assert!(!out.release_finalizer);
    assert!(
        events(&out.actions).is_empty(),
        "the rollback was already decided"
    );
    run.world.settle();
    for _ in 0..3 {
        run.now += 5;
        if run.tick_with(None, deleting).release_finalizer {
            break;
        }
    }
    assert!(run.last.as_ref().unwrap().release_finalizer);
    assert_eq!(run.status.decision.clone().unwrap().reason, "Aborted");
}

#[test]
fn a_bad_duration_is_invalid_naming_the_field() {
    let spec = spec_with("stages: [{weight: 30, duration: 1m}, {weight: 100, duration: 10x}]\n");
    let mut run = Run::new(spec, 6);
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Invalid);
    let msg = out.status.message.clone().unwrap();
    assert!(msg.contains("spec.stages[1].duration"), "{msg}");
    assert_eq!(events(&out.actions), ["Invalid"]);
    assert!(!out
        .actions
        .iter()
        .any(|a| !matches!(a, Action::Event { .. })));
    assert_eq!(
        condition(&out.status, "Invalid"),
        ("True".into(), "Invalid".into())
    );
    assert_eq!(out.requeue_after, None);
    // Terminal: replays do nothing.
    run.now += 60;
    let again = run.tick(None).clone();
    assert!(again.actions.is_empty());
    assert_eq!(again.status, out.status);
}

#[test]
fn bad_limits_and_shell_errors_are_invalid() {
    let cases: Vec<(ConcurrencyExperimentSpec, Option<&str>, &str)> = vec![
        (
            spec_with("").tap(|s| s.analysis.checks[0].max_increase = Some("ten".into())),
            None,
            "spec.analysis.checks[0].maxIncrease",
        ),
        (
            spec_with("")
                .tap(|s| s.analysis.checks[0].max = Some(crate::api::Limit::Text("fast".into()))),
            None,
            "spec.analysis.checks[0].max",
        ),
        (
            spec_with("").tap(|s| s.analysis.interval = "0s".into()),
            None,
            "spec.analysis.interval",
        ),
        (
            spec(),
            Some("container web not found in Deployment storefront"),
            "container web",
        ),
    ];
    for (spec, spec_error, needle) in cases {
        let mut obs = World::new(Router::Replicas, 6).observe(at(0));
        obs.spec_error = spec_error.map(String::from);
        let out = step(&spec, &Default::default(), &obs);
        assert_eq!(out.status.phase, Phase::Invalid, "{needle}");
        assert!(
            out.status.message.clone().unwrap().contains(needle),
            "{needle}"
        );
    }
}

#[test]
fn a_spec_broken_mid_flight_rolls_back() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.advance(60, 3, Verdict::Pass);
    run.spec.analysis.interval = "often".into();
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::RollingBack);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, "InvalidSpec");
    assert!(d.message.contains("spec.analysis.interval"));
}

#[test]
fn conditions_keep_their_transition_time_while_status_holds() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    let first = conditions::get(&run.status, "Progressing")
        .unwrap()
        .last_transition_time
        .clone();
    run.advance(60, 5, Verdict::Pass);
    let c = conditions::get(&run.status, "Progressing").unwrap();
    assert_eq!(c.last_transition_time, first);
    assert_eq!(c.status, "True");
    assert_eq!(c.message, run.status.message.clone().unwrap());
    run.spec.paused = true;
    run.now += 5;
    run.tick(None);
    let c = conditions::get(&run.status, "Progressing").unwrap();
    assert_eq!(
        (c.status.as_str(), c.last_transition_time.clone()),
        ("False", Time(at(run.now)))
    );
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}

impl Tap for ConcurrencyExperimentSpec {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[test]
fn deleting_a_gateway_experiment_restores_the_route_first() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 4);
    run.tick(None);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.world.route_weight, 30);
    run.auto_settle = false;
    run.log.clear();
    let out = run.tick_with(None, deleting).clone();
    assert!(out.actions.contains(&Action::RestoreRoute));
    assert!(!out.actions.contains(&Action::RemoveCandidate));
    assert!(!out.release_finalizer);
    run.now += 10;
    assert_eq!(
        run.tick_with(None, deleting).actions,
        vec![Action::RemoveCandidate]
    );
    run.now += 5;
    let out = run.tick_with(None, deleting).clone();
    assert!(out.release_finalizer);
    assert_eq!(out.status.phase, Phase::RolledBack);
    assert_eq!(run.world.route_weight, 0);
}
