//! The candidate's pods and the share they carry: the last stage keeps a standby until the
//! candidate has carried it, and pods that lose readiness give their share back and count as a
//! failure. Traffic is never left on pods that cannot take it (issue: a lone overloaded
//! candidate pod failed its readiness probe at 100 % and the Service had no endpoints).

use super::ctx::Ctx;
use super::observations::EventType;
use crate::api::reason::DecisionReason;
use crate::traffic::ReplicaSplit;

/// The split stage `index` applies now: the plan's (`Ctx::split`), with the router's standby
/// at a last stage of 100 % until an analysis there passed — the target is not scaled to 0
/// before the candidate carried the full share through a passing analysis.
pub fn split(cx: &Ctx, index: usize) -> ReplicaSplit {
    let weight = cx.spec.stages.get(index).map_or(100, |s| s.weight);
    let split = cx.split(weight);
    if standby_kept(cx, index) {
        cx.spec.traffic.router.with_standby(split, cx.sizing())
    } else {
        split
    }
}

/// Stage `index` is at 100 % and none of its analyses passed yet.
fn standby_kept(cx: &Ctx, index: usize) -> bool {
    let weight = cx.spec.stages.get(index).map_or(100, |s| s.weight);
    weight == 100 && cx.status.stage_passed_analyses == 0
}

/// The split of stage `index` keeps a standby now (one more baseline pod than the plan).
pub fn has_standby(cx: &Ctx, index: usize) -> bool {
    let weight = cx.spec.stages.get(index).map_or(100, |s| s.weight);
    split(cx, index).baseline > cx.split(weight).baseline
}

/// Says when the standby goes: the first analysis at the last stage just passed
/// (`had_standby`: the split kept one before this step's analysis was recorded).
pub fn release_standby(cx: &mut Ctx, index: usize, had_standby: bool) {
    if !had_standby || has_standby(cx, index) {
        return;
    }
    let stage = cx.status.stage.clone().unwrap_or_default();
    let pods = split(cx, index).candidate;
    let msg = format!(
        "Stage {stage}: an analysis passed with the candidate's {pods} pods carrying the share \
         beside one standby baseline pod; the standby goes now and the candidate takes 100% of \
         traffic."
    );
    cx.event(EventType::Normal, "StandbyReleased", msg);
}

/// Candidate pods that were ready in this stage's split (its clock started) and are not any
/// more: their share goes back to the baseline (the routers see to that: `replicas` grows the
/// target by the missing pods, `gatewayAPI` lowers the route to what the ready pods carry),
/// and the loss counts as one failure against `failureLimit` — a config whose pods drop out of
/// the Service under their share is not carrying it.
pub fn lost(cx: &mut Ctx, index: usize) -> Loss {
    let Some(c) = cx.obs.candidate.as_ref() else {
        return Loss::None;
    };
    if cx.status.stage_started_at.is_none() || !cx.obs.candidate_runs_spec_config {
        return Loss::None;
    }
    // The ready count the last status recorded; a shrink the experiment asked for itself
    // (spec.replicas below it) is no loss.
    let before = cx.status.candidate.as_ref().map_or(0, |v| v.ready_replicas);
    let needed = split(cx, index).candidate;
    if c.ready_replicas >= before || c.ready_replicas >= needed || c.replicas < before {
        return Loss::None;
    }
    let (now, weight) = (c.ready_replicas, cx.status.effective_weight);
    let stage = cx.status.stage.clone().unwrap_or_default();
    let why = match &cx.obs.candidate_problem {
        Some(p) => format!(" ({p})"),
        None => String::new(),
    };
    cx.status.failed_analyses += 1;
    let (n, limit) = (cx.status.failed_analyses, cx.spec.analysis.failure_limit);
    let lost = format!(
        "{now} of {needed} candidate pods ready at stage {stage}, {before} before: the candidate \
         lost readiness with {weight}% of traffic{why}"
    );
    if n > limit {
        let msg = format!("Rolling back: {lost}; {n} failures exceed failureLimit {limit}.");
        cx.start_rollback(DecisionReason::CandidateUnready, msg);
        return Loss::RolledBack;
    }
    Loss::Tolerated(format!(
        "{lost}. The baseline takes back their share; counted as a failure ({n} failed, {limit} \
         tolerated)."
    ))
}

/// What a readiness loss led to.
pub enum Loss {
    None,
    /// Beyond `failureLimit`: the rollback started.
    RolledBack,
    /// Counted; the Warning to emit once the split's actions (the baseline taking the share
    /// back) are queued, so nothing comes before them.
    Tolerated(String),
}

/// Emits a tolerated loss' Warning.
pub fn warn(cx: &mut Ctx, loss: Loss) {
    if let Loss::Tolerated(msg) = loss {
        cx.event(EventType::Warning, "CandidateUnready", msg);
    }
}
