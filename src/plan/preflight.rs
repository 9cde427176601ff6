//! The pre-flight series lookup's decision (the lookup itself is `analysis::preflight`, run by
//! the shell while `preflight_due`): before anything is created, a check whose series never
//! existed makes the experiment `Invalid`; series the lookup cannot judge yet (the pods scraped
//! for less than `SETTLE`, no request served) are noted and the experiment starts; Prometheus
//! unreachable or failing is looked at again until `spec.progressDeadline` from the first
//! look, then the experiment rolls back as at any missed progress deadline — nothing was
//! created, so there is nothing to restore. A pass is recorded in `status.preflight` and never
//! looked at again.

use crate::api::reason::EventReason;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ctx::Ctx;
use super::observations::{EventType, Preflight};
use super::timing::{add, until};
use super::validate::Timing;
use crate::analysis::preflight::RATE_WINDOW;
use crate::analysis::reach;
use crate::api::reason::DecisionReason;
use crate::api::{format_duration, ConcurrencyExperimentStatus, Phase, PreflightStatus};

/// How soon an undecided lookup is repeated.
pub const PREFLIGHT_RETRY: Duration = Duration::from_secs(30);

/// Condition and Event reason of an experiment refused for a missing series.
pub const SERIES_MISSING: &str = EventReason::SeriesMissing.as_str();
/// Condition reason while the lookup waits for Prometheus.
pub const AWAITING_SERIES: &str = "AwaitingSeries";
/// Warning Event when the target's queue times come from a one-second clock.
pub const QUEUE_TIME_COARSE: &str = EventReason::QueueTimeCoarse.as_str();
/// Normal Event when the experiment starts with series the lookup could not judge.
pub const SERIES_NOT_CHECKED: &str = EventReason::SeriesNotChecked.as_str();
/// Warning Event when the stages cannot reach the checks' data at the measured request rate.
pub const TOO_FEW_REQUESTS: &str = EventReason::TooFewRequests.as_str();

/// The shell looks up the series now: Pending, and no lookup has passed yet.
pub fn preflight_due(status: &ConcurrencyExperimentStatus) -> bool {
    status.phase == Phase::Pending
        && status
            .preflight
            .as_ref()
            .is_none_or(|p| p.passed_at.is_none())
}

/// True when the experiment may create its variants: the lookup passed now or before (or was
/// not made). Otherwise the step is decided here: `Invalid`, a wait, or a rollback.
pub(super) fn cleared(cx: &mut Ctx, t: &Timing) -> bool {
    if cx
        .status
        .preflight
        .as_ref()
        .is_some_and(|p| p.passed_at.is_some())
    {
        return true;
    }
    let Some(found) = cx.obs.preflight.clone() else {
        return true;
    };
    let now = cx.now();
    let since = cx
        .status
        .preflight
        .as_ref()
        .map_or(Time(now), |p| p.since.clone());
    let record = |message: Option<String>, passed: bool| PreflightStatus {
        since: since.clone(),
        passed_at: passed.then_some(Time(now)),
        message,
    };
    match found {
        Preflight::Passed => {
            let notes: Vec<String> = [too_few_requests(cx), coarse_queue_clock(cx)]
                .into_iter()
                .flatten()
                .collect();
            let notes = (!notes.is_empty()).then(|| notes.join(" "));
            cx.status.preflight = Some(record(notes, true));
            true
        }
        Preflight::Unchecked(why) => {
            let msg = format!(
                "Not every check's series could be looked up before the start ({why}); the \
                 analyses will tell."
            );
            cx.event(
                EventType::Normal,
                EventReason::SeriesNotChecked,
                msg.clone(),
            );
            let short = too_few_requests(cx);
            let coarse = coarse_queue_clock(cx);
            let noted = [Some(msg), short, coarse].into_iter().flatten();
            cx.status.preflight = Some(record(Some(noted.collect::<Vec<_>>().join(" ")), true));
            true
        }
        Preflight::Missing(what) => {
            let msg = format!(
                "The experiment cannot run: the pre-flight series lookup found no data for it, \
                 before anything was created: {what}."
            );
            cx.status.preflight = Some(record(Some(what), false));
            cx.status.phase = Phase::Invalid;
            cx.status.message = Some(msg.clone());
            cx.reason = SERIES_MISSING.into();
            cx.event(EventType::Warning, EventReason::SeriesMissing, msg);
            false
        }
        Preflight::Unavailable(why) => {
            cx.status.preflight = Some(record(Some(why.clone()), false));
            let deadline = add(since.0, t.progress_deadline);
            if deadline.is_none_or(|d| now >= d) {
                let msg = format!(
                    "The pre-flight series lookup did not succeed within progressDeadline \
                      {} ({why}); nothing was created.",
                    format_duration(t.progress_deadline)
                );
                cx.start_rollback(DecisionReason::ProgressDeadlineExceeded, msg);
                // Nothing to restore: finished in this step, as an abort while Pending is.
                super::finish::roll_back(cx);
                return false;
            }
            cx.status.message = Some(format!(
                "The pre-flight series lookup failed ({why}); nothing is created until \
                 it succeeds. Looking again every {}, for at most progressDeadline {}.",
                format_duration(PREFLIGHT_RETRY),
                format_duration(t.progress_deadline)
            ));
            cx.reason = AWAITING_SERIES.into();
            let left = deadline.map_or(PREFLIGHT_RETRY, |d| until(now, d));
            cx.wait(PREFLIGHT_RETRY.min(left));
            false
        }
    }
}

/// The stages held against the target's measured request rate (`analysis::reach`, as `kubectl
/// concurrency init` warns before anything is applied): a Warning Event `TooFewRequests` that
/// says how they fall short and what to change, and the same text for `status.preflight`. The
/// experiment starts anyway — traffic may grow, and a short stage ends Inconclusive, never
/// Pass — but the user hears it before traffic moves, not after `inconclusiveLimit` analyses.
fn too_few_requests(cx: &mut Ctx) -> Option<String> {
    let rate = cx.obs.target_rate?;
    let plan = reach::Plan {
        analysis: &cx.spec.analysis,
        stages: &cx.spec.stages,
    };
    let notes = reach::notes(&plan, rate);
    if notes.is_empty() {
        return None;
    }
    let msg = format!(
        "Measured before the start, over the last {}: {} The experiment starts anyway.",
        format_duration(RATE_WINDOW),
        notes.join(" ")
    );
    cx.event(EventType::Warning, EventReason::TooFewRequests, msg.clone());
    Some(msg)
}

/// The target's queue times read as a one-second clock (`analysis::queue_header`): a Warning
/// Event `QueueTimeCoarse` before traffic moves, and the same text for `status.preflight`. The
/// experiment starts anyway — a regression of a second still shows, and the other checks
/// judge — and every analysis's `queueTime` reason says it again.
fn coarse_queue_clock(cx: &mut Ctx) -> Option<String> {
    let clock = cx.obs.queue_clock.clone()?;
    let msg = format!(
        "Measured before the start, over the last {}: {}. The experiment starts anyway.",
        format_duration(RATE_WINDOW),
        clock.describe()
    );
    cx.event(
        EventType::Warning,
        EventReason::QueueTimeCoarse,
        msg.clone(),
    );
    Some(msg)
}
