//! The pre-flight series lookup's decision: nothing is created before it passes; a missing
//! series is `Invalid`; an undecided lookup waits within `progressDeadline`; a pass is kept.

use super::*;
use crate::api::Phase;

fn missing() -> Preflight {
    Preflight::Missing(
        "check gvlWait: ruby_gvl_wait_seconds_total (written by this repository's reference \
         images and gvl-sim (their GVL instrumentation); no published gem writes it) has no \
         series for the pods of Deployment storefront in the last 1h; drop the gvlWait check"
            .into(),
    )
}

fn nothing_created(actions: &[Action]) -> bool {
    actions.iter().all(|a| matches!(a, Action::Event { .. }))
}

#[test]
fn a_series_that_never_existed_is_invalid_before_anything_is_created() {
    let mut run = Run::new(spec(), 6);
    let out = run
        .tick_with(None, |o| o.preflight = Some(missing()))
        .clone();
    assert_eq!(out.status.phase, Phase::Invalid);
    assert!(nothing_created(&out.actions), "{:?}", out.actions);
    assert_eq!(events(&out.actions), [SERIES_MISSING]);
    let msg = out.status.message.clone().unwrap();
    assert!(
        msg.starts_with("The experiment cannot run: the pre-flight series lookup found no data")
            && msg.contains("check gvlWait: ruby_gvl_wait_seconds_total")
            && msg.contains("no published gem writes it"),
        "{msg}"
    );
    assert_eq!(
        condition(&out.status, conditions::INVALID),
        ("True".into(), SERIES_MISSING.into())
    );
    assert_eq!(
        out.status.original, None,
        "nothing recorded, nothing to restore"
    );
    assert!(out.status.preflight.as_ref().unwrap().passed_at.is_none());
    run.now += 60;
    assert!(run.tick(None).actions.is_empty(), "Invalid is final");
}

#[test]
fn prometheus_down_waits_then_ends_at_the_progress_deadline_with_nothing_created() {
    let mut run = Run::new(spec(), 6);
    let down = || Preflight::Unavailable("Prometheus is unreachable: connection refused".into());
    let out = run.tick_with(None, |o| o.preflight = Some(down())).clone();
    assert_eq!(out.status.phase, Phase::Pending);
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(secs(out.requeue_after), PREFLIGHT_RETRY.as_secs());
    let msg = out.status.message.clone().unwrap();
    assert!(
        msg.starts_with(
            "Prometheus did not answer the pre-flight series lookup (Prometheus is unreachable"
        ) && msg.contains("nothing is created until it does"),
        "{msg}"
    );
    assert_eq!(
        condition(&out.status, conditions::PROGRESSING),
        ("True".into(), AWAITING_SERIES.into())
    );
    let since = out.status.preflight.clone().unwrap().since;
    // Looking again changes nothing in status: no write.
    run.now += 30;
    let again = run.tick_with(None, |o| o.preflight = Some(down())).clone();
    assert_eq!(again.status, out.status);
    assert_eq!(again.status.preflight.unwrap().since, since);
    // progressDeadline (10m) after the first look: the usual outcome of a missed deadline.
    run.now = 600;
    let out = run.tick_with(None, |o| o.preflight = Some(down())).clone();
    assert_eq!(out.status.phase, Phase::RolledBack);
    let d = out.status.decision.clone().unwrap();
    assert_eq!(d.reason, "ProgressDeadlineExceeded");
    assert!(
        d.message
            .contains("did not answer the pre-flight series lookup within progressDeadline 10m"),
        "{d:?}"
    );
    assert!(nothing_created(&out.actions));
    assert_eq!(
        events(&out.actions),
        ["ProgressDeadlineExceeded", "RolledBack"]
    );
    assert_eq!(run.count(|a| !matches!(a, Action::Event { .. })), 0);
}

#[test]
fn what_cannot_be_told_yet_is_noted_and_the_experiment_starts() {
    // A target nobody sent a request yet: traffic may only come with the experiment.
    let mut run = Run::new(spec(), 6);
    let why = "check minRequests: rails_requests_total: the pods of Deployment storefront \
               served no request in the last 1h";
    let out = run
        .tick_with(None, |o| {
            o.preflight = Some(Preflight::Unchecked(why.into()))
        })
        .clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert!(out
        .actions
        .iter()
        .any(|a| matches!(a, Action::EnsureCandidate { .. })));
    assert!(events(&out.actions).contains(&SERIES_NOT_CHECKED.to_string()));
    let p = out.status.preflight.clone().unwrap();
    assert!(p.passed_at.is_some());
    assert!(p.message.unwrap().contains(why));
}

#[test]
fn a_pass_starts_the_experiment_and_is_never_looked_at_again() {
    let mut run = Run::new(spec(), 6);
    run.tick_with(None, |o| {
        o.preflight = Some(Preflight::Unavailable("timeout".into()))
    });
    run.now += 30;
    let out = run
        .tick_with(None, |o| o.preflight = Some(Preflight::Passed))
        .clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert!(out
        .actions
        .iter()
        .any(|a| matches!(a, Action::EnsureCandidate { .. })));
    let p = out.status.preflight.clone().unwrap();
    assert_eq!(p.since.0, at(0));
    assert_eq!(p.passed_at.map(|t| t.0), Some(at(30)));
    assert!(!preflight_due(&out.status));
    // An answer after the pass (the shell does not look again) decides nothing.
    run.now += 5;
    let out = run
        .tick_with(None, |o| o.preflight = Some(missing()))
        .clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert!(!events(&out.actions).contains(&SERIES_MISSING.to_string()));
}

#[test]
fn without_a_lookup_the_experiment_starts_as_before() {
    // `--preflight=false`: the shell makes no lookup, and nothing waits for one.
    let mut run = Run::new(spec(), 6);
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert_eq!(out.status.preflight, None);
    assert!(preflight_due(&ConcurrencyExperimentStatus::default()));
}
