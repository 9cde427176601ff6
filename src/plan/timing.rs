//! Clocks: when the next analysis is due and when a stage may end.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{parse_duration, ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, Phase};

/// How soon to look again while pods start, scale or terminate. Deployment and HPA changes
/// wake the experiment (the controller watches targets, candidates and their autoscalers),
/// the shell looks again soon after any write of its own (`AFTER_WRITE`), and what has a time
/// (the next analysis, a stage's end, the progress deadline) sets its own wake-up, so this is
/// only a safety net for a missed event. At 30 s, 500 experiments waiting for pods that never
/// come cost 17 reconciles/s and most of the operator's idle CPU (docs/benchmarks/scale.md).
pub const POLL: Duration = Duration::from_secs(120);
/// How soon to look again while the target does not exist (its creation wakes the experiment).
pub const TARGET_POLL: Duration = Duration::from_secs(60);
/// After the shell wrote something whose effect is not watched (an HTTPRoute's weights), look
/// again this soon.
pub const AFTER_WRITE: Duration = Duration::from_secs(2);
/// Never requeue sooner than this (a due analysis runs on the next reconcile).
const MIN_REQUEUE: Duration = Duration::from_secs(1);

/// True when the shell should run an analysis now: the experiment is Progressing or Paused, the
/// current stage's split is in force, and `interval` has passed since the later of the stage
/// start and the last analysis. A bad interval is never due (the step reports it as Invalid).
pub fn analysis_due(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
    now: Timestamp,
) -> bool {
    let Ok(interval) = parse_duration("spec.analysis.interval", &spec.analysis.interval) else {
        return false;
    };
    next_analysis_at(status, interval).is_some_and(|at| now >= at)
}

/// True when the current stage's split has not been in force within `spec.progressDeadline`
/// (the condition `progress` rolls back on): only then does the shell list the candidate's
/// pods to say why, so a thousand waiting experiments cost no pod lists.
pub fn deadline_passed(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
    now: Timestamp,
) -> bool {
    let Ok(deadline) = parse_duration("spec.progressDeadline", &spec.progress_deadline) else {
        return false;
    };
    matches!(status.phase, Phase::Progressing | Phase::Paused)
        && status.stage_started_at.is_none()
        && status
            .stage_entered_at
            .as_ref()
            .and_then(|e| add(e.0, deadline))
            .is_some_and(|end| now >= end)
}

/// When the next analysis is due, if analyses run in this state at all.
pub fn next_analysis_at(
    status: &ConcurrencyExperimentStatus,
    interval: Duration,
) -> Option<Timestamp> {
    if interval.is_zero() {
        return None;
    }
    // A selection's analyses count from every variant's share in force, a stage's from its own.
    let started = match status.phase {
        Phase::Selecting => status.selection.as_ref()?.started_at.as_ref()?.0,
        Phase::Progressing | Phase::Paused => status.stage_started_at.as_ref()?.0,
        _ => return None,
    };
    let from = match &status.last_analysis_at {
        Some(last) if last.0 > started => last.0,
        _ => started,
    };
    add(from, interval)
}

/// `at + d`, or `None` on overflow (durations are capped at a year by the parser).
pub fn add(at: Timestamp, d: Duration) -> Option<Timestamp> {
    let span = jiff::SignedDuration::try_from(d).ok()?;
    at.checked_add(span).ok()
}

/// Time from `now` until `at`, at least `MIN_REQUEUE`.
pub fn until(now: Timestamp, at: Timestamp) -> Duration {
    let left = Duration::try_from(at.duration_since(now)).unwrap_or_default();
    left.max(MIN_REQUEUE)
}

/// Keeps the sooner of two requeue times.
pub fn sooner(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}
