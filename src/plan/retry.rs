//! Retry: the annotation `concurrency.dev/retry: "true"` runs a `RolledBack` experiment again,
//! in place, from stage 1 with a fresh status (the target's replicas are recorded anew: the
//! rollback restored them). It is one-shot like the approve annotation: once a retry (or its
//! refusal) is decided the machine asks for its removal (`Action::ClearRetry`) and remembers
//! in status that it was spent, so an annotation still there after a crash or a failed removal
//! retries nothing more — not even after the next rollback.
//!
//! A retry spends the abort annotation that rolled the last run back (removes it, and ignores
//! it until it is seen gone), so `abort` then `retry` runs again; `spec.abort: true` refuses it.
//!
//! Refused, with a Warning Event saying why, and removed: a `Succeeded` experiment (the
//! target already runs the candidate), an `Invalid` one (fix the spec and re-create it), one
//! still running or rolling back (waiting for the rollback to end would retry in a later step
//! on the same observations, which a replay must not do), and any while another live
//! experiment targets the same Deployment.

use super::conditions;
use super::ctx::Ctx;
use super::observations::{Action, EventType};
use crate::api::reason::EventReason;
use crate::api::{ConcurrencyExperimentStatus, Phase, ANNOTATION_ABORT, ANNOTATION_RETRY};

/// The annotation asks for a retry and has not been acted on yet.
fn requested(cx: &Ctx) -> bool {
    cx.obs.retry_requested && !cx.status.retry_annotation_consumed
}

/// Before the phase handlers: a retried experiment continues as `Pending` in this step.
pub fn handle(cx: &mut Ctx) {
    if !requested(cx) || cx.obs.deleting() {
        return;
    }
    let why = match super::controls::retry_refusal(cx.spec, &cx.status) {
        Some(why) => why,
        None => match &cx.obs.other_experiment {
            Some(other) => format!(
                "experiment {other} runs on Deployment {} now; retry once it has finished",
                cx.spec.target_ref.name
            ),
            None => return retry(cx),
        },
    };
    cx.status.retry_annotation_consumed = true;
    let msg = format!("Retry refused: {why}. Removing annotation {ANNOTATION_RETRY}.");
    cx.event(EventType::Warning, EventReason::RetryRefused, msg);
}

fn retry(cx: &mut Ctx) {
    let after = cx
        .status
        .decision
        .as_ref()
        .map(|d| format!(" after a rollback ({})", d.reason))
        .unwrap_or_default();
    let old = std::mem::take(&mut cx.status);
    // Kept: what belongs to the object rather than to the run (the phase conditions keep
    // their transition times; the approve annotation's memory lives on its own).
    let conditions = old
        .conditions
        .into_iter()
        .filter(|c| c.type_ != conditions::NO_DATA)
        .collect();
    // The abort annotation still there is the one that rolled the last run back (`spec.abort`
    // is false here): spent, and removed, so the retried run is not aborted at once.
    let abort_spent = cx.obs.abort_requested;
    cx.status = ConcurrencyExperimentStatus {
        phase: Phase::Pending,
        observed_generation: old.observed_generation,
        conditions,
        approve_annotation_consumed: old.approve_annotation_consumed,
        retry_annotation_consumed: true,
        abort_annotation_consumed: abort_spent,
        ..Default::default()
    };
    let removed = if abort_spent {
        format!(" Removing annotation {ANNOTATION_ABORT}, which rolled the last run back.")
    } else {
        String::new()
    };
    let msg = format!(
        "Retried on request (annotation {ANNOTATION_RETRY}){after}: starting again from stage \
         1 with a fresh history.{removed}"
    );
    cx.event(EventType::Normal, EventReason::Retried, msg);
}

/// After the phase handlers: keep asking for the removal until it shows, then forget. Last,
/// so it never delays an action that moves traffic.
pub fn settle(cx: &mut Ctx) {
    if cx.status.abort_annotation_consumed && !cx.obs.deleting() {
        if cx.obs.abort_requested {
            cx.actions.push(Action::ClearAbort);
        } else {
            cx.status.abort_annotation_consumed = false;
        }
    }
    if !cx.status.retry_annotation_consumed || cx.obs.deleting() {
        return;
    }
    if cx.obs.retry_requested {
        cx.actions.push(Action::ClearRetry);
    } else {
        cx.status.retry_annotation_consumed = false;
    }
}
