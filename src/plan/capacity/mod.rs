//! The capacity gate: before each weight step, predict the candidate's per-pod load at the
//! next stage from what the current stage measured, and refuse a step it could not carry.
//!
//! Load per candidate pod there = total rate × the next stage's share / its candidate pods,
//! with the share and pods the router will really give (`traffic::Router::split`: one replica
//! gives 50% on one pod, whatever the plan says). Capacity per pod from the candidate's
//! measured CPU and I/O seconds per request and its config (`analysis::capacity`), capped by
//! its CPU limit. Every analysis of the current stage with the split in force, enough
//! candidate requests and those measurements gives a prediction; the highest decides — load
//! varies, and the step must hold at the busiest interval seen. A `queueTime` check whose
//! `max` the candidate already exceeded at the current share counts as over, whatever the
//! estimate says. Nothing measured in the stage: the step waits (Inconclusive), and each
//! analysis that passes its checks without the measurement counts against
//! `inconclusiveLimit` — never a silent pass.
//!
//! Over the limit: roll back (`InsufficientCapacity`), or with `onInconclusive: pause` hold
//! (hold reason `InsufficientCapacity`) until approved — the approve annotation takes the step
//! anyway — or aborted. Off with `maxPredictedUtilization: off`, and for `server: custom`
//! (no capacity model); both are told in an Event at the start.

use super::analysis::{count_inconclusive, describe_stage};
use super::ctx::Ctx;
use super::validate::Timing;
use crate::api::reason::{DecisionReason, HoldReason};
use crate::api::{CapacityGate, InconclusiveAction, ServerConfig, ServerKind, Verdict};

mod predict;

pub use predict::evaluate;
use predict::{lower_first, stage_name};
pub(super) use predict::{predict_step, Source};

/// Decision, hold and Event reason when the candidate could not carry the next stage.
pub const INSUFFICIENT_CAPACITY: &str = HoldReason::InsufficientCapacity.as_str();
/// Condition reason while a step waits for the measurements to predict it.
pub const CAPACITY_UNKNOWN: &str = "CapacityUnknown";
/// Event reason at the start when the gate does not apply.
pub const CAPACITY_GATE_OFF: &str = crate::api::reason::EventReason::CapacityGateOff.as_str();

/// Why the gate does not apply to this experiment, if it does not.
pub fn off_reason(candidate: &ServerConfig, t: &Timing) -> Option<&'static str> {
    if t.max_utilization.is_none() {
        Some("spec.analysis.maxPredictedUtilization is off")
    } else if candidate.server == ServerKind::Custom {
        Some("server: custom has no capacity model")
    } else {
        None
    }
}

/// What the gate says about stepping out of the current stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Step.
    Open,
    /// Do not step now: held (`InsufficientCapacity`) or waiting for the measurements.
    Closed,
    /// A rollback was started.
    RolledBack,
}

/// The prediction for the step out of stage `index`, kept in `status.capacityGate` while the
/// stage runs (a preview: nothing is decided before the stage has earned its step). Not
/// written while there is nothing to say yet, so the prediction the stage was entered with
/// stays until the stage measured something.
pub fn refresh(cx: &mut Ctx, t: &Timing, index: usize) {
    let Some(max) = t.max_utilization else {
        return;
    };
    if off_reason(cx.candidate(), t).is_some() || index + 1 >= cx.spec.stages.len() {
        return;
    }
    let gate = evaluate(cx, index, max);
    let same_step = cx
        .status
        .capacity_gate
        .as_ref()
        .is_some_and(|g| g.stage_index == gate.stage_index);
    if gate.verdict != Verdict::Inconclusive || same_step {
        store(cx, gate);
    }
}

/// The gate at the moment stage `index` has earned its step. `new_analysis`: this reconcile
/// recorded an analysis (an inconclusive one is counted only once).
pub fn gate(cx: &mut Ctx, t: &Timing, index: usize, new_analysis: bool) -> Gate {
    let Some(max) = t.max_utilization else {
        return Gate::Open;
    };
    if off_reason(cx.candidate(), t).is_some() {
        return Gate::Open;
    }
    let gate = evaluate(cx, index, max);
    let (verdict, message) = (gate.verdict, gate.message.clone());
    if store(cx, gate) {
        return Gate::Open;
    }
    match verdict {
        Verdict::Pass => Gate::Open,
        Verdict::Fail => match cx.spec.analysis.on_inconclusive {
            InconclusiveAction::Rollback => {
                let next = stage_name(cx.spec, index + 1);
                let msg = format!("Rolling back before stage {next}: {message}");
                cx.start_rollback(DecisionReason::InsufficientCapacity, msg);
                Gate::RolledBack
            }
            InconclusiveAction::Pause => {
                // The Event (with the numbers) is emitted where the phase changes.
                cx.set_hold(Some(HoldReason::InsufficientCapacity));
                Gate::Closed
            }
        },
        Verdict::Inconclusive => {
            let latest = cx.status.analyses.last().cloned();
            let passed = latest.as_ref().filter(|a| a.verdict == Verdict::Pass);
            if let Some(rec) = passed.filter(|_| new_analysis) {
                let why = format!("its checks passed, but {}", lower_first(&message));
                let why = why.trim_end_matches('.');
                if count_inconclusive(cx, &describe_stage(rec), why) {
                    return Gate::RolledBack;
                }
            }
            Gate::Closed
        }
    }
}

/// The gate would let stage `index` take its step now (turned off, or the limit raised since
/// it held): an `InsufficientCapacity` hold has nothing left to wait for.
pub fn allows(cx: &Ctx, t: &Timing, index: usize) -> bool {
    match t.max_utilization {
        _ if off_reason(cx.candidate(), t).is_some() => true,
        Some(max) => evaluate(cx, index, max).verdict == Verdict::Pass,
        None => true,
    }
}

/// The approve annotation on an `InsufficientCapacity` hold: the person takes the step the
/// gate refused. Remembered in `status.capacityGate.approved` until the step is taken.
pub fn approve(cx: &mut Ctx) {
    if let Some(g) = cx.status.capacity_gate.as_mut() {
        g.approved = true;
    }
}

/// Writes `gate` into status, keeping an approval of the same step. True when approved.
pub(super) fn store(cx: &mut Ctx, mut gate: CapacityGate) -> bool {
    let approved = cx
        .status
        .capacity_gate
        .as_ref()
        .is_some_and(|g| g.stage_index == gate.stage_index && g.approved);
    gate.approved = approved;
    cx.status.capacity_gate = Some(gate);
    approved
}
