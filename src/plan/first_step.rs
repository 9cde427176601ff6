//! The capacity gate for the step out of a selection into stage 1. The winner's analyses in
//! the selection are its measurements (CPU and I/O per request at its share there), so the
//! load stage 1 puts on its pods is predicted like any later step — a selection's winner never
//! takes its first step blind. Over the limit the experiment rolls back
//! (`InsufficientCapacity`) whatever `onInconclusive` says: the selection is over and there is
//! no stage yet to hold in. Without the measurements stage 1 starts as a single candidate's
//! would (no gate before stage 1), and the gate's message says why.

use super::capacity::{off_reason, predict_step, store, Source};
use super::ctx::Ctx;
use super::validate::Timing;
use crate::api::reason::DecisionReason;
use crate::api::{AnalysisRecord, Verdict};

/// Predicts stage 1 for the chosen winner; `Some(message)` when it must not be taken.
pub(super) fn refuse_stage_one(cx: &mut Ctx, t: &Timing) -> Option<(DecisionReason, String)> {
    let max = t.max_utilization?;
    if off_reason(cx.candidate(), t).is_some() {
        return None;
    }
    let st = cx.status.selection.as_ref()?;
    let winner = st.winner?;
    let variant = st.variants.iter().find(|v| v.index == winner)?;
    let samples: Vec<AnalysisRecord> = variant.capacity_samples.clone();
    let analysed = variant.passed_analyses + variant.failed_analyses > 0;
    let records: Vec<&AnalysisRecord> = samples.iter().collect();
    let from = Source {
        name: "the selection".into(),
        analysed,
    };
    let gate = predict_step(cx, 0, &records, &from, max);
    let (verdict, message) = (gate.verdict, gate.message.clone());
    store(cx, gate);
    (verdict == Verdict::Fail).then(|| {
        let stage = format!("1/{}", cx.spec.stages.len());
        (
            DecisionReason::InsufficientCapacity,
            format!("Rolling back before stage {stage}: {message}"),
        )
    })
}
