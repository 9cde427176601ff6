//! From what the stage machine decided to what is told: a pure function of the experiment, the
//! status the step wrote and the step's Events.
//!
//! Why Events: the machine emits each of them exactly once, on the transition, and a replay of
//! the same observations on the status it wrote emits none (`plan::step`). The shell calls
//! `derive` only for a step whose status write was stored (`Written::Saved`), so the status
//! write — conditional on the resourceVersion the decision was made from — is the idempotency
//! key: a reconcile replayed after a restart, on another leader or after a conflict reads that
//! status back, finds no transition, and sends nothing.

use jiff::Timestamp;
use kube::ResourceExt;

use super::{Kind, Notification, NotifiedCheck, Stage};
use crate::analysis::Unit;
use crate::api::reason::{EventReason, HoldReason};
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus, Phase, Verdict};
use crate::plan::Action;

/// The notifications of one step: one per notable Event in `actions`, in their order.
pub fn derive(
    exp: &ConcurrencyExperiment,
    status: &ConcurrencyExperimentStatus,
    actions: &[Action],
    now: Timestamp,
) -> Vec<Notification> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event {
                reason, message, ..
            } => kind_of(*reason, status)
                .map(|k| build(exp, status, k, reason.as_str(), message, now)),
            _ => None,
        })
        .collect()
}

/// The Event reasons that are told. `InconclusiveLimit` and `InsufficientCapacity` are both a
/// hold and a rollback decision: only the hold is told here, the rollback when it completes.
fn kind_of(reason: EventReason, status: &ConcurrencyExperimentStatus) -> Option<Kind> {
    let held = |h: HoldReason| {
        status.phase == Phase::Paused && status.hold_reason.as_deref() == Some(h.as_str())
    };
    match reason {
        // An edit of spec.candidate restarts at stage 1 with the new config: a new start.
        EventReason::Started | EventReason::SpecChanged => Some(Kind::Started),
        EventReason::StageAdvanced => Some(Kind::StageAdvanced),
        EventReason::Hold(HoldReason::AwaitingApproval) => Some(Kind::AwaitingApproval),
        EventReason::Hold(
            h @ (HoldReason::InconclusiveLimit | HoldReason::InsufficientCapacity),
        ) if held(h) => Some(Kind::Paused),
        EventReason::RolledBack => Some(Kind::RolledBack),
        EventReason::Succeeded => Some(Kind::Promoted),
        EventReason::Invalid => Some(Kind::Invalid),
        _ => None,
    }
}

fn build(
    exp: &ConcurrencyExperiment,
    status: &ConcurrencyExperimentStatus,
    kind: Kind,
    event_reason: &str,
    message: &str,
    now: Timestamp,
) -> Notification {
    let uid = exp.uid().unwrap_or_default();
    let stage = status.stage_index.map(|index| Stage {
        index,
        count: exp.spec.stages.len() as i32,
        planned_weight: status.planned_weight,
        effective_weight: status.effective_weight,
    });
    let decision = status
        .decision
        .clone()
        .filter(|_| matches!(kind, Kind::RolledBack | Kind::Promoted));
    let reason = match &decision {
        Some(d) => d.reason.clone(),
        None => event_reason.to_string(),
    };
    let checks = match kind {
        Kind::RolledBack | Kind::Paused => not_passed(exp, status),
        _ => Vec::new(),
    };
    let index = stage.as_ref().map_or(-1, |s| s.index);
    Notification {
        id: format!("{uid}/{kind}/{index}/{now}"),
        kind,
        at: now,
        namespace: exp.namespace().unwrap_or_default(),
        name: exp.name_any(),
        uid,
        target: exp.spec.target_ref.name.clone(),
        phase: status.phase,
        stage,
        baseline: status.baseline.as_ref().map(|b| b.summary.clone()),
        candidate: exp.spec.walked_candidate(Some(status)).summary(),
        reason,
        message: message.to_string(),
        decision,
        checks,
    }
}

/// The checks of the latest analysis that did not pass — for a `CheckFailed` rollback the
/// failing check with its values and limit. A rollback for another reason (abort, deadline)
/// after passing analyses has none.
fn not_passed(
    exp: &ConcurrencyExperiment,
    status: &ConcurrencyExperimentStatus,
) -> Vec<NotifiedCheck> {
    let Some(latest) = status
        .analyses
        .last()
        .filter(|a| a.verdict != Verdict::Pass)
    else {
        return Vec::new();
    };
    latest
        .checks
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| {
            let unit = exp
                .spec
                .analysis
                .checks
                .iter()
                .find(|s| s.display_name() == c.name)
                .map_or(Unit::Plain, Unit::of);
            let text = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| unit.format(v));
            NotifiedCheck {
                baseline: text(c.baseline),
                candidate: text(c.candidate),
                result: c.clone(),
            }
        })
        .collect()
}
