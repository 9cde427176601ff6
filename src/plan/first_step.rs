//! The capacity gate for the step out of a selection into stage 1. The winner's analyses in
//! the selection are its measurements (CPU and I/O per request at its share there), so the
//! load stage 1 puts on its pods is predicted like any later step — a selection's winner never
//! takes its first step blind: the same measurements keep a survivor that could not carry the
//! rollout (any stage, up to 100 %) from winning (`cannot_carry`), and with none left the
//! experiment rolls back (`InsufficientCapacity`) whatever `onInconclusive` says — the
//! selection is over and there is no stage yet to hold in. Without the measurements stage 1
//! starts as a single candidate's would (no gate before stage 1), and the gate's message in
//! `status.capacityGate` says why.

use super::capacity::{off_reason, predict_step, store, Source};
use super::ctx::Ctx;
use super::validate::Timing;
use crate::api::{AnalysisRecord, Verdict};

/// Writes the prediction for stage 1 of the chosen winner into `status.capacityGate`. The
/// choice only picks a survivor that `cannot_carry` found able to carry every stage, so this
/// is the gate's record of the first step, like the later ones.
pub(super) fn record_stage_one(cx: &mut Ctx, t: &Timing) {
    let Some(max) = t.max_utilization else {
        return;
    };
    if off_reason(cx.candidate(), t).is_some() {
        return;
    }
    let Some(st) = cx.status.selection.as_ref() else {
        return;
    };
    let Some(variant) = st
        .winner
        .and_then(|w| st.variants.iter().find(|v| v.index == w))
    else {
        return;
    };
    let samples: Vec<AnalysisRecord> = variant.capacity_samples.clone();
    let analysed = variant.passed_analyses + variant.failed_analyses > 0;
    let records: Vec<&AnalysisRecord> = samples.iter().collect();
    let from = Source {
        name: "the selection".into(),
        analysed,
    };
    let gate = predict_step(cx, 0, &records, &from, max, cx.candidate());
    store(cx, gate);
}

/// Why survivor `index` (of `spec.candidates`) could not carry the rollout at the load its
/// selection analyses measured: the first stage whose predicted utilization is over
/// `maxPredictedUtilization`, with the numbers. `None` when it could, or when it cannot be
/// predicted (then the gates before each step decide, as for a single candidate).
pub(super) fn cannot_carry(cx: &Ctx, t: &Timing, index: i32) -> Option<String> {
    let max = t.max_utilization?;
    let candidate = cx.spec.selection_winner(Some(index))?;
    if off_reason(candidate, t).is_some() {
        return None;
    }
    let st = cx.status.selection.as_ref()?;
    let variant = st.variants.iter().find(|v| v.index == index)?;
    let records: Vec<&AnalysisRecord> = variant.capacity_samples.iter().collect();
    let from = Source {
        name: "the selection".into(),
        analysed: true,
    };
    (0..cx.spec.stages.len()).find_map(|stage| {
        let gate = predict_step(cx, stage, &records, &from, max, candidate);
        (gate.verdict == Verdict::Fail).then_some(gate.message)
    })
}
