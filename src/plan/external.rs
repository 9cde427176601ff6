//! `promotion: external` (GitOps): the stages run as usual; after the last one the experiment
//! holds (`AwaitingExternalPromotion`) with the change to commit in `status.promotionPatch`
//! instead of writing the target, and completes — as a promotion whose template write Git
//! already made — once the target's template carries the candidate config and nothing else
//! changed. The operator never writes the target's template in this mode.
//!
//! Git applies the whole manifest, so the completion arrives as a new template; it is told
//! apart from someone else's edit (`TargetChanged`) by `TargetState::promoted_hash`: the
//! template with the candidate config rendered in is the same as for the template the
//! experiment started from (`original.promotedTemplateHash`). Before the hold the same change
//! is `TargetChanged`: the candidate was not judged at 100 % yet, and baseline and candidate
//! are now the same config, so nothing is left to compare.

use super::ctx::Ctx;
use crate::api::reason::{DecisionReason, HoldReason};
use crate::api::Promotion;

/// The promoted fingerprint of the template the experiment found, kept once with `original`
/// (also for experiments an older operator started, while their template is still the one
/// recorded), so the template Git brings can be compared with it.
pub fn remember(cx: &mut Ctx) {
    let Some(target) = &cx.obs.target else {
        return;
    };
    let Some(original) = cx.status.original.as_mut() else {
        return;
    };
    let unchanged = original.template_hash.as_deref() == Some(target.template_hash.as_str());
    if original.promoted_template_hash.is_none() && unchanged {
        original.promoted_template_hash = target.promoted_hash.clone();
    }
}

/// The target runs the candidate config, and its template is the one the experiment started
/// from with exactly that change (env order aside).
pub fn arrived(cx: &Ctx) -> bool {
    let (Some(target), Some(original)) = (&cx.obs.target, &cx.status.original) else {
        return false;
    };
    target.runs_candidate_config
        && target.promoted_hash.is_some()
        && target.promoted_hash == original.promoted_template_hash
}

/// Held at the last stage for Git.
pub fn holding(cx: &Ctx) -> bool {
    cx.spec.promotion == Promotion::External
        && cx.hold() == Some(HoldReason::AwaitingExternalPromotion)
}

/// All stages passed: hold for the commit, with the patch it needs.
pub fn hold(cx: &mut Ctx) {
    cx.status.promotion_patch = cx
        .obs
        .target
        .as_ref()
        .and_then(|t| t.promotion_patch.clone());
    cx.set_hold(Some(HoldReason::AwaitingExternalPromotion));
}

/// Held, and Git brought the candidate config: decide to promote. The promotion handler then
/// only scales the target back, restores the route and removes the candidate — the template
/// write is already done. True when decided. `spec.paused` holds this too.
pub fn complete(cx: &mut Ctx) -> bool {
    if !holding(cx) || !arrived(cx) || cx.spec.paused {
        return false;
    }
    let msg = format!(
        "Deployment {}'s pod template now carries the candidate config ({}), changed outside \
         the operator: completing the promotion — the target back at its size, then the \
         candidate removed.",
        cx.spec.target_ref.name,
        cx.candidate().summary()
    );
    cx.start_promotion(DecisionReason::PromotedExternally, msg);
    true
}

/// A promotion gate held for another mode than the spec's (`promotion` edited while held) is
/// lifted, so the stage that earned its step decides again under the mode the spec names now —
/// in particular an approval never writes the template of a target that became `external`.
pub fn lift_gate_of_another_mode(cx: &mut Ctx) {
    let stale = match cx.hold() {
        Some(HoldReason::AwaitingApproval) => cx.spec.promotion != Promotion::Manual,
        Some(HoldReason::AwaitingExternalPromotion) => cx.spec.promotion != Promotion::External,
        _ => false,
    };
    if stale {
        cx.set_hold(None);
        cx.status.promotion_patch = None;
    }
}

/// The hold's Event: the one-line summary first (Events are cut at 1000 characters), then the
/// patch itself.
pub fn hold_message(cx: &Ctx) -> String {
    let stage = cx.status.stage.clone().unwrap_or_default();
    let name = &cx.spec.target_ref.name;
    match &cx.status.promotion_patch {
        Some(p) => format!(
            "All stages passed; holding at stage {stage} until Git promotes: {}. Commit this \
             strategic merge patch to Deployment {name} (status.promotionPatch); the \
             experiment completes once the target runs it:\n{}",
            p.summary, p.strategic_merge_patch
        ),
        None => format!(
            "All stages passed; holding at stage {stage} until Deployment {name}'s template \
             carries the candidate config ({}) from Git.",
            cx.candidate().summary()
        ),
    }
}

/// The status message while held.
pub fn status_message(cx: &Ctx) -> String {
    match &cx.status.promotion_patch {
        Some(p) => format!(
            "Commit to Git: {} (status.promotionPatch); completes once Deployment {} runs it.",
            p.summary, cx.spec.target_ref.name
        ),
        None => String::new(),
    }
}

/// Promoting, and the target no longer runs the candidate config (the commit was reverted):
/// the operator does not write it back — it rolls back around what Git now says.
pub fn reverted(cx: &mut Ctx) {
    let msg = format!(
        "Deployment {}'s pod template no longer carries the candidate config (the commit was \
         reverted?) before the promotion completed; restoring the target's size, then \
         removing the candidate.",
        cx.spec.target_ref.name
    );
    cx.start_rollback(DecisionReason::TargetChanged, msg);
}

/// `TargetChanged` when the change is the candidate config itself, before the hold.
pub fn early_message(cx: &Ctx) -> String {
    let stage = cx.status.stage.clone().unwrap_or_default();
    let baseline = cx
        .status
        .baseline
        .as_ref()
        .map_or_else(|| "the baseline".to_string(), |b| b.summary.clone());
    format!(
        "Deployment {}'s pod template was changed to the candidate config at stage {stage}, \
         before the candidate was judged at 100 % (baseline and candidate are now the same, so \
         nothing is left to compare). Not promoting: restoring the target's size, then \
         removing the candidate; the target keeps the template it was given — revert that \
         change to return to {baseline}.",
        cx.spec.target_ref.name
    )
}
