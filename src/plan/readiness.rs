//! The candidate's pods and the share they carry: the last stage keeps a standby until the
//! candidate has carried it, and pods that lose readiness give their share back at once.
//! Traffic is never left on pods that cannot take it (issue 15: a lone overloaded candidate pod
//! failed its readiness probe at 100 % and the Service had no endpoints).

use super::ctx::Ctx;
use super::observations::EventType;
use crate::api::reason::EventReason;
use crate::traffic::ReplicaSplit;

/// The split stage `index` applies now: the plan's (`Ctx::split`), with the router's standby
/// at a last stage of 100 % until an analysis there passed — the target is not scaled to 0
/// before the candidate carried the full share through a passing analysis.
pub fn split(cx: &Ctx, index: usize) -> ReplicaSplit {
    let mut split = cx.split(cx.stage_weight(index));
    // At 100 % under an HPA the candidate grows by the HPA's rule ahead of `original.replicas`,
    // which follows its ready pods (`machine::follow_load_at_full`).
    let grown = cx
        .status
        .original
        .as_ref()
        .and_then(|o| o.autoscaled_replicas);
    if let Some(grown) = grown.filter(|_| cx.stage_weight(index) == 100) {
        split.candidate = split.candidate.max(grown);
    }
    if standby_kept(cx, index) {
        cx.spec.traffic.router.with_standby(split, cx.sizing())
    } else {
        split
    }
}

/// Stage `index` is at 100 % and none of its analyses passed yet.
fn standby_kept(cx: &Ctx, index: usize) -> bool {
    cx.stage_weight(index) == 100 && cx.status.stage_passed_analyses == 0
}

/// Stage `index` keeps a standby until an analysis there passed (a last stage of 100 % on the
/// `replicas` router without an HPA). That analysis ran beside the standby, so the stage ends
/// only on a later one, which the candidate carried alone (`progress::stage_earned`).
pub fn keeps_standby(cx: &Ctx, index: usize) -> bool {
    let plan = cx.split(cx.stage_weight(index));
    cx.stage_weight(index) == 100
        && cx
            .spec
            .traffic
            .router
            .with_standby(plan, cx.sizing())
            .baseline
            > plan.baseline
}

/// The split of stage `index` keeps a standby now (one more baseline pod than the plan).
pub fn has_standby(cx: &Ctx, index: usize) -> bool {
    split(cx, index).baseline > cx.split(cx.stage_weight(index)).baseline
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
    cx.event(EventType::Normal, EventReason::StandbyReleased, msg);
}

/// Candidate pods that were ready in this stage's split (its clock started) and are not any
/// more: their share goes back to the baseline (the routers see to that: `replicas` grows the
/// target by the missing pods, `gatewayAPI` lowers the route to what the ready pods carry),
/// the stage does not end until they are back, and the Warning (returned, emitted after the
/// split's actions so nothing comes before them) says so. Not a failure by itself: a ready
/// count also drops when the Deployment replaces a pod, so the analyses judge the candidate.
pub fn lost(cx: &Ctx, index: usize) -> Option<String> {
    let c = cx.obs.candidate.as_ref()?;
    if cx.status.stage_started_at.is_none() || !cx.obs.candidate_runs_spec_config {
        return None;
    }
    // The ready count the last status recorded; a shrink the experiment asked for itself
    // (spec.replicas below it) is no loss.
    let before = cx.status.candidate.as_ref().map_or(0, |v| v.ready_replicas);
    let needed = split(cx, index).candidate;
    if c.ready_replicas >= before || c.ready_replicas >= needed || c.replicas < before {
        return None;
    }
    let (now, weight) = (c.ready_replicas, cx.status.effective_weight);
    let stage = cx.status.stage.clone().unwrap_or_default();
    let why = match &cx.obs.candidate_problem {
        Some(p) => format!(" ({p})"),
        None => String::new(),
    };
    Some(format!(
        "{now} of {needed} candidate pods ready at stage {stage}, {before} before: the candidate \
         lost readiness with {weight}% of traffic{why}. The baseline takes back their share; the \
         stage does not end until they are ready again."
    ))
}

/// Emits a loss' Warning.
pub fn warn(cx: &mut Ctx, loss: Option<String>) {
    if let Some(msg) = loss {
        cx.event(EventType::Warning, EventReason::CandidateUnready, msg);
    }
}
