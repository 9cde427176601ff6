//! Holds and pauses of a running experiment: why it is paused (a hold that needs a person,
//! or `spec.paused`), the Events when that changes, and what lifts a hold.

use super::approval;
use super::capacity;
use super::conditions;
use super::ctx::Ctx;
use super::external;
use super::observations::EventType;
use super::validate::Timing;
use crate::api::reason::EventReason;
use crate::api::reason::HoldReason;
use crate::api::{ConcurrencyExperimentStatus, Phase, ANNOTATION_APPROVE};

/// Condition reason while paused by `spec.paused`.
pub const PAUSED_BY_USER: &str = EventReason::PausedByUser.as_str();

/// Why a `Paused` experiment is paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// A hold (`status.holdReason`).
    Hold(HoldReason),
    /// `spec.paused`.
    ByUser,
}

impl Pause {
    /// The condition reason it is reported under.
    pub fn as_str(self) -> &'static str {
        match self {
            Pause::Hold(h) => h.as_str(),
            Pause::ByUser => PAUSED_BY_USER,
        }
    }
}

/// Why the stored status is paused. Held at the promotion gate and paused by the spec, both
/// apply; the stored condition says which one was reported (else every replay would see a
/// change and repeat the event).
pub fn stored(status: &ConcurrencyExperimentStatus) -> Option<Pause> {
    if status.phase != Phase::Paused {
        return None;
    }
    let reported = conditions::get(status, conditions::PROGRESSING).map(|c| c.reason.as_str());
    let hold = status.hold_reason.as_deref().and_then(HoldReason::parse);
    match (hold, reported) {
        (Some(_), Some(PAUSED_BY_USER)) => Some(Pause::ByUser),
        (Some(h), _) => Some(Pause::Hold(h)),
        (None, _) => Some(Pause::ByUser),
    }
}

/// Why the experiment is paused as the step stands.
pub fn now(cx: &Ctx) -> Option<Pause> {
    match cx.hold() {
        // Holds that need a person win over spec.paused: unpausing alone does not lift them.
        Some(h @ (HoldReason::InconclusiveLimit | HoldReason::InsufficientCapacity)) => {
            Some(Pause::Hold(h))
        }
        _ if cx.spec.paused => Some(Pause::ByUser),
        Some(h) => Some(Pause::Hold(h)),
        None => None,
    }
}

/// The Event of a change of pause (`None`: resumed).
pub fn event(cx: &mut Ctx, pause: Option<Pause>) {
    let stage = cx.status.stage.clone().unwrap_or_default();
    let (type_, reason, msg) = match pause {
        None => (
            EventType::Normal,
            EventReason::Resumed,
            format!("Resumed at stage {stage}."),
        ),
        Some(Pause::Hold(h @ HoldReason::InconclusiveLimit)) => (
            EventType::Warning,
            EventReason::Hold(h),
            format!(
                "Paused at stage {stage}: {} inconclusive analyses exceed inconclusiveLimit {}; \
                 annotate {ANNOTATION_APPROVE}=true to resume or abort to roll back.",
                cx.status.inconclusive_analyses, cx.spec.analysis.inconclusive_limit
            ),
        ),
        Some(Pause::Hold(h @ HoldReason::InsufficientCapacity)) => (
            EventType::Warning,
            EventReason::Hold(h),
            format!(
                "Paused at stage {stage}: {} Annotate {ANNOTATION_APPROVE}=true to take the step \
                 anyway, or abort to roll back.",
                gate_message(cx)
            ),
        ),
        Some(Pause::Hold(h @ HoldReason::AwaitingApproval)) => (
            EventType::Normal,
            EventReason::Hold(h),
            format!(
                "All stages passed; holding at stage {stage} until the promotion is approved \
                 (spec.approved: true, or annotate {ANNOTATION_APPROVE}=true)."
            ),
        ),
        Some(Pause::Hold(h @ HoldReason::AwaitingExternalPromotion)) => (
            EventType::Normal,
            EventReason::Hold(h),
            external::hold_message(cx),
        ),
        Some(Pause::ByUser) => (
            EventType::Normal,
            EventReason::PausedByUser,
            format!("Paused by spec.paused at stage {stage}; analyses keep running."),
        ),
    };
    cx.event(type_, reason, msg);
}

/// The capacity gate's last word, for messages.
pub fn gate_message(cx: &Ctx) -> String {
    cx.status
        .capacity_gate
        .as_ref()
        .map(|g| g.message.clone())
        .unwrap_or_default()
}

/// The approve annotation lifts an inconclusive hold and is spent; the count starts again.
/// `spec.approved` does not: left on, it would make every later hold meaningless.
pub fn lift_inconclusive_hold(cx: &mut Ctx) {
    if cx.hold() != Some(HoldReason::InconclusiveLimit) || !approval::requested(cx) {
        return;
    }
    approval::consume(cx);
    let n = cx.status.inconclusive_analyses;
    cx.set_hold(None);
    cx.status.inconclusive_analyses = 0;
    let stage = cx.status.stage.clone().unwrap_or_default();
    let msg = format!(
        "Annotation {ANNOTATION_APPROVE} lifted the inconclusive hold at stage {stage} \
         ({n} inconclusive analyses; the count starts again). Removing the annotation."
    );
    cx.event(EventType::Normal, EventReason::HoldLifted, msg);
}

/// An `InsufficientCapacity` hold ends with the approve annotation — the person takes the step
/// the gate refused (at once, if the stage still has earned it), and the annotation is spent —
/// or by itself once the spec lets the step pass (limit raised, gate off).
pub fn lift_capacity_hold(cx: &mut Ctx, t: &Timing, index: usize) {
    if cx.hold() != Some(HoldReason::InsufficientCapacity) {
        return;
    }
    let stage = cx.status.stage.clone().unwrap_or_default();
    let next = cx
        .status
        .capacity_gate
        .as_ref()
        .map_or_else(String::new, |g| format!(" to stage {}", g.stage));
    let msg = if capacity::allows(cx, t, index) {
        format!(
            "The capacity hold at stage {stage} is lifted: spec.analysis.maxPredictedUtilization \
             ({}) now allows the step{next}.",
            cx.spec.analysis.max_predicted_utilization
        )
    } else if approval::requested(cx) {
        approval::consume(cx);
        capacity::approve(cx);
        format!(
            "Annotation {ANNOTATION_APPROVE} lifted the capacity hold at stage {stage}: \
             stepping{next} despite the predicted utilization. Removing the annotation."
        )
    } else {
        return;
    };
    cx.set_hold(None);
    cx.event(EventType::Normal, EventReason::HoldLifted, msg);
}

/// Who approves the manual promotion, if anyone. An approve annotation present here is spent
/// even when `spec.approved` already approves: this is the hold it was waiting for.
pub fn approve_promotion(cx: &mut Ctx) -> Option<String> {
    let annotation = approval::requested(cx);
    if annotation {
        approval::consume(cx);
    }
    if cx.obs.promotion_approved {
        Some("spec.approved".into())
    } else if annotation {
        Some(format!("annotation {ANNOTATION_APPROVE}"))
    } else {
        None
    }
}
