//! `spec.progressDeadline`: a stage whose split is not in force within it (pods that never
//! get ready, a route that is never accepted) ends the experiment, with what the pods say.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ctx::Ctx;
use super::readiness;
use super::timing;
use super::validate::Timing;

/// True when the stage's split has not been in force within `spec.progressDeadline` of
/// entering it. Not counted while `spec.paused` (the person looking may be fixing the cause):
/// a resume before the split was in force starts the count again. A status written before the
/// deadline existed starts it now.
pub(super) fn missed(cx: &mut Ctx, t: &Timing, in_force: bool, resumed: bool) -> bool {
    if in_force || cx.status.stage_started_at.is_some() {
        return false;
    }
    let now = cx.now();
    let entered = match &cx.status.stage_entered_at {
        Some(e) if !resumed => e.0,
        _ => {
            cx.status.stage_entered_at = Some(Time(now));
            return false;
        }
    };
    if cx.spec.paused {
        return false;
    }
    let Some(end) = timing::add(entered, t.progress_deadline) else {
        return false;
    };
    if now >= end {
        return true;
    }
    // The deadline has a time of its own: the experiment is woken at it, not found past it by
    // the next safety poll.
    cx.wait(timing::until(now, end));
    false
}

/// Why the deadline was missed, with what the pods say.
pub(super) fn message(cx: &Ctx, index: usize) -> String {
    let stage = cx.status.stage.clone().unwrap_or_default();
    let weight = cx.stage_weight(index);
    let split = readiness::split(cx, index);
    let c = cx.obs.candidate.as_ref().map_or(0, |c| c.ready_replicas);
    let t = cx.obs.target.as_ref().map(|t| &t.deployment);
    let (b, b_replicas) = t.map_or((0, 0), |t| (t.ready_replicas, t.replicas));
    let problem = match &cx.obs.candidate_problem {
        Some(p) => format!("; {p}"),
        None => String::new(),
    };
    format!(
        "Stage {stage} did not get its split ({weight}%) in force within progressDeadline {}: \
         {c} of {} candidate pods ready, {b} of {} baseline pods ready, {}% of traffic to the \
         candidate{problem}.",
        cx.spec.progress_deadline, split.candidate, b_replicas, cx.obs.effective_weight,
    )
}
