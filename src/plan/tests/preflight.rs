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
        msg.starts_with("The pre-flight series lookup failed (Prometheus is unreachable")
            && msg.contains("nothing is created until it succeeds"),
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
            .contains("did not succeed within progressDeadline 10m"),
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

#[test]
fn stages_that_cannot_reach_min_requests_at_the_measured_rate_are_warned_of_and_start() {
    // 0.1 req/s: stage 1 (30 %) brings ~2 requests per variant per 1m interval.
    let mut run = Run::new(spec(), 6);
    let out = run
        .tick_with(None, |o| {
            o.preflight = Some(Preflight::Passed);
            o.target_rate = Some(0.1);
        })
        .clone();
    assert_eq!(out.status.phase, Phase::Progressing, "warned, not refused");
    assert!(out
        .actions
        .iter()
        .any(|a| matches!(a, Action::EnsureCandidate { .. })));
    assert_eq!(events(&out.actions)[0], TOO_FEW_REQUESTS);
    let (kind, warning) = event_of(&out.actions, TOO_FEW_REQUESTS);
    assert_eq!(kind, EventType::Warning);
    assert!(
        warning
            .starts_with("Measured before the start, over the last 5m: At the target's 0.1 req/s")
            && warning.contains("fewer than minRequests")
            && warning.contains("Lengthen spec.analysis.interval")
            && warning.ends_with("The experiment starts anyway."),
        "{warning}"
    );
    let p = out.status.preflight.clone().unwrap();
    assert!(p.passed_at.is_some());
    assert_eq!(p.message, Some(warning));

    // Said once: the lookup is never made again after a pass.
    run.now += 60;
    let again = run.tick(None).clone();
    assert!(!events(&again.actions).contains(&TOO_FEW_REQUESTS.to_string()));
}

#[test]
fn enough_traffic_or_no_measured_rate_warns_of_nothing() {
    for rate in [Some(100.0), None] {
        let mut run = Run::new(spec(), 6);
        let out = run
            .tick_with(None, |o| {
                o.preflight = Some(Preflight::Passed);
                o.target_rate = rate;
            })
            .clone();
        assert_eq!(out.status.phase, Phase::Progressing);
        assert!(
            !events(&out.actions).contains(&TOO_FEW_REQUESTS.to_string()),
            "{rate:?}: {:?}",
            out.actions
        );
        assert_eq!(out.status.preflight.unwrap().message, None, "{rate:?}");
    }
}

#[test]
fn an_unchecked_lookup_keeps_its_note_beside_the_traffic_warning() {
    let mut run = Run::new(spec(), 6);
    let out = run
        .tick_with(None, |o| {
            o.preflight = Some(Preflight::Unchecked("no request served".into()));
            o.target_rate = Some(0.1);
        })
        .clone();
    let evs = events(&out.actions);
    assert!(
        evs.contains(&SERIES_NOT_CHECKED.to_string())
            && evs.contains(&TOO_FEW_REQUESTS.to_string()),
        "{evs:?}"
    );
    let msg = out.status.preflight.unwrap().message.unwrap();
    assert!(
        msg.starts_with(
            "Not every check's series could be looked up before the start (no request served)"
        ) && msg.contains("fewer than minRequests"),
        "{msg}"
    );
}

#[test]
fn a_one_second_queue_clock_is_warned_of_before_traffic_moves_and_the_experiment_starts() {
    let clock = crate::analysis::queue_header::CoarseClock {
        requests: 1800.0,
        shares: vec![(0.1, 0.11), (0.5, 0.49), (1.0, 0.98)],
    };
    let mut run = Run::new(spec(), 6);
    let out = run
        .tick_with(None, |o| {
            o.preflight = Some(Preflight::Passed);
            o.queue_clock = Some(clock.clone());
        })
        .clone();
    assert_eq!(out.status.phase, Phase::Progressing, "warned, not refused");
    let (kind, warning) = event_of(&out.actions, QUEUE_TIME_COARSE);
    assert_eq!(kind, EventType::Warning);
    assert!(
        warning.starts_with("Measured before the start, over the last 5m: queue time looks like a one-second clock (11 % ≤ 100 ms, 49 % ≤ 500 ms, 98 % ≤ 1 s of 1800 requests)")
            && warning.ends_with("The experiment starts anyway."),
        "{warning}"
    );
    assert_eq!(out.status.preflight.clone().unwrap().message, Some(warning));
    run.now += 60;
    let again = run.tick(None).clone();
    assert!(!events(&again.actions).contains(&QUEUE_TIME_COARSE.to_string()));
}
