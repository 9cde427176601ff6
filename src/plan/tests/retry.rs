//! Retry: the retry annotation runs a RolledBack experiment again from stage 1 — once — and is
//! refused (and removed) for every other phase.

use super::rollback::in_stage_two;
use super::*;
use crate::api::Phase;

/// Rolled back on failed checks from stage 2, the baseline restored.
pub(super) fn rolled_back() -> Run {
    let mut run = in_stage_two(spec());
    run.advance(60, 2, Verdict::Fail);
    while run.status.phase != Phase::RolledBack {
        run.now += 5;
        run.tick(None);
        assert!(run.now < 10_000);
    }
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 6);
    run.log.clear();
    run
}

fn clears(run: &Run) -> usize {
    run.count(|a| *a == Action::ClearRetry)
}

#[test]
fn a_rolled_back_experiment_is_retried_from_stage_one_with_a_fresh_status() {
    let mut run = rolled_back();
    // The user scaled the target meanwhile: the new size is what a rollback restores next.
    run.world.target.as_mut().unwrap().deployment.replicas = 9;
    run.world.settle();
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["Retried", "Started"]);
    let msg = message(&out.actions, "Retried");
    assert!(msg.contains("after a rollback (CheckFailed)"), "{msg}");
    let st = &out.status;
    assert_eq!(st.phase, Phase::Progressing);
    assert_eq!(st.stage.as_deref(), Some("1/3"));
    assert_eq!(st.decision, None);
    assert!(st.analyses.is_empty() && st.baseline_reference.is_empty());
    assert_eq!((st.failed_analyses, st.last_verdict), (0, None));
    assert_eq!(st.original.as_ref().unwrap().replicas, 9);
    assert_eq!(condition(st, "RolledBack").0, "False");
    assert_eq!(condition(st, "Progressing").0, "True");
    assert!(out
        .actions
        .contains(&Action::EnsureCandidate { replicas: 3 }));
    // The removal comes last.
    assert_eq!(out.actions.last(), Some(&Action::ClearRetry));
    assert!(st.retry_annotation_consumed);
    assert!(!run.world.retry_annotation);
    run.now += 5;
    run.tick(None);
    assert!(
        !run.status.retry_annotation_consumed,
        "seen gone: forgotten"
    );
    while !run.status.phase.is_terminal() {
        run.now += 60;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 20_000);
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 9);
    assert_eq!(clears(&run), 1);
}

#[test]
fn a_lost_removal_does_not_retry_twice() {
    let mut run = rolled_back();
    run.world.retry_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    // The removal keeps failing; the retry fails again and rolls back.
    let mut phases = Vec::new();
    for _ in 0..40 {
        run.world.retry_annotation = true;
        run.now += 60;
        run.tick(Some(Verdict::Fail));
        phases.push(run.status.phase);
        assert_eq!(
            run.last.as_ref().unwrap().actions.last(),
            Some(&Action::ClearRetry)
        );
    }
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(run.events().iter().filter(|e| *e == "Retried").count(), 1);
    // Once the removal went through, a new annotation is a new retry.
    run.world.retry_annotation = false;
    run.now += 5;
    run.tick(None);
    run.world.retry_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.events().iter().filter(|e| *e == "Retried").count(), 2);
}

#[test]
fn retrying_a_succeeded_or_invalid_experiment_is_refused_and_the_annotation_removed() {
    let mut run = Run::new(spec_with("stages: [{weight: 100, duration: 1m}]\n"), 2);
    run.tick(None);
    while run.status.phase != Phase::Succeeded {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    let before = run.status.clone();
    run.log.clear();
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["RetryRefused"]);
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("succeeded"), "{msg}");
    assert!(msg.contains("already runs puma 2×4"), "{msg}");
    assert_eq!(out.actions.last(), Some(&Action::ClearRetry));
    assert_eq!(out.requeue_after, None);
    let after = ConcurrencyExperimentStatus {
        retry_annotation_consumed: false,
        ..out.status.clone()
    };
    assert_eq!(after, before, "nothing but the spent annotation changes");
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status, before);

    let mut run = Run::new(spec_with("stages: [{weight: 100, duration: 10x}]\n"), 2);
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Invalid);
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Invalid);
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("re-create"), "{msg}");
    assert_eq!(clears(&run), 1);
}

#[test]
fn a_retry_of_a_running_or_rolling_back_experiment_is_refused() {
    let mut run = in_stage_two(spec());
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert_eq!(out.status.stage.as_deref(), Some("2/3"));
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("is Progressing"), "{msg}");
    assert!(!run.world.retry_annotation);

    let mut run = in_stage_two(spec());
    run.auto_settle = false;
    run.tick_with(None, |o| o.abort_requested = true);
    assert_eq!(run.status.phase, Phase::RollingBack);
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("is RollingBack"), "{msg}");
    for _ in 0..4 {
        run.world.settle();
        run.now += 5;
        run.tick(None);
    }
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert!(!run.events().contains(&"Retried".to_string()));
}

#[test]
fn a_retry_waits_for_another_experiment_on_the_target() {
    let mut run = rolled_back();
    run.world.other_experiment = Some("storefront-falcon".into());
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RolledBack);
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("storefront-falcon"), "{msg}");
    assert!(out
        .actions
        .iter()
        .all(|a| matches!(a, Action::Event { .. } | Action::ClearRetry)));
}

#[test]
fn a_deleted_experiment_is_released_not_retried() {
    let mut run = rolled_back();
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run
        .tick_with(None, |o| o.deleting_since = Some(o.now))
        .clone();
    assert!(out.release_finalizer);
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(out.status.phase, Phase::RolledBack);
}

#[test]
fn a_retry_forgets_the_no_data_warning_of_the_last_run() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    while run.status.phase != Phase::RolledBack {
        run.now += 30;
        let mut obs = run.obs();
        if analysis_due(&run.spec, &run.status, obs.now) {
            let mut rec = record(Verdict::Inconclusive, run.now, 0, obs.effective_weight);
            rec.checks[0].candidate = None;
            rec.checks[0].baseline = None;
            obs.analysis = Some(AnalysisOutcome {
                record: rec,
                recommendation: None,
                no_data: true,
                queries: Default::default(),
            });
        }
        let analysis = obs.analysis.clone();
        run.tick_with(None, move |o| o.analysis = analysis.clone());
        assert!(run.now < 5000);
    }
    assert_eq!(condition(&run.status, conditions::NO_DATA).0, "True");
    run.world.retry_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert!(conditions::get(&run.status, conditions::NO_DATA).is_none());
    assert_eq!(run.status.no_data_analyses, 0);
}

/// As documented: `kubectl annotate … concurrency.dev/abort=true`, then
/// `kubectl annotate … concurrency.dev/retry=true`. The abort annotation that rolled the run
/// back is spent by the retry and removed; the retried run goes on, and a new abort still
/// aborts it.
#[test]
fn abort_then_retry_by_annotations_runs_again_and_a_new_abort_still_aborts() {
    let mut run = in_stage_two(spec());
    run.world.abort_annotation = true;
    while run.status.phase != Phase::RolledBack {
        run.now += 5;
        run.tick(None);
        assert!(run.now < 10_000);
    }
    assert_eq!(
        run.status.decision.as_ref().unwrap().reason,
        "Aborted",
        "{:?}",
        run.status.decision
    );
    // The abort annotation is still on the object (the operator never removed it).
    assert!(run.world.abort_annotation);
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["Retried", "Started"]);
    assert!(
        out.actions.contains(&Action::ClearAbort),
        "{:?}",
        out.actions
    );
    assert!(message(&out.actions, "Retried").contains("concurrency.dev/abort"));
    assert_eq!(run.status.phase, Phase::Progressing);
    assert!(!run.world.abort_annotation && !run.world.retry_annotation);
    // Seen gone: forgotten, and the retried run goes on.
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert!(!run.status.abort_annotation_consumed);
    // A new abort aborts.
    run.world.abort_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

/// A removal that failed: the spent annotation is asked away again and aborts nothing.
#[test]
fn a_spent_abort_annotation_still_there_aborts_nothing_but_spec_abort_does() {
    let mut run = in_stage_two(spec());
    run.world.abort_annotation = true;
    while run.status.phase != Phase::RolledBack {
        run.now += 5;
        run.tick(None);
        assert!(run.now < 10_000);
    }
    run.world.retry_annotation = true;
    run.now += 5;
    // The removal fails: the annotation stays.
    run.tick_with(None, |_| {});
    run.world.abort_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert!(out.actions.contains(&Action::ClearAbort));
    // spec.abort is a level of its own: it aborts whatever the annotation's state.
    run.world.abort_annotation = true;
    run.spec.abort = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn a_retry_with_spec_abort_set_is_refused() {
    let mut run = rolled_back();
    run.spec.abort = true;
    run.world.retry_annotation = true;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RolledBack);
    let msg = message(&out.actions, "RetryRefused");
    assert!(msg.contains("spec.abort is true"), "{msg}");
}
