//! Approval: a declarative flag for the promotion and a one-shot annotation for holds.
//!
//! - `spec.approved: true` approves a `manual` promotion and nothing else. Left on (GitOps),
//!   it must not lift inconclusive holds, or those holds would mean nothing.
//! - The annotation `concurrency.dev/approve: "true"` approves the next hold, whichever comes
//!   first: an inconclusive hold (`onInconclusive: pause`) or the manual promotion. Set before
//!   the hold, it waits for it. Once acted on it is spent: the machine asks the shell to remove
//!   it (`Action::ClearApproval`) and remembers in status that it was spent, so the same
//!   annotation, still present after a crash or a failed removal, approves nothing more. The
//!   memory is dropped when the annotation is seen gone.

use super::ctx::Ctx;
use super::observations::Action;

/// The annotation asks for approval and has not been acted on yet.
pub fn requested(cx: &Ctx) -> bool {
    cx.obs.resume_requested && !cx.status.approve_annotation_consumed
}

/// Spends the annotation: from here on it is removed, not obeyed.
pub fn consume(cx: &mut Ctx) {
    cx.status.approve_annotation_consumed = true;
}

/// After the phase handlers: keep asking for the removal until it shows, then forget. The
/// removal goes last so it never delays an action that moves traffic. A deleted experiment
/// takes its annotations with it.
pub fn settle(cx: &mut Ctx) {
    if !cx.status.approve_annotation_consumed || cx.obs.deleting() {
        return;
    }
    if cx.obs.resume_requested {
        cx.actions.push(Action::ClearApproval);
    } else {
        cx.status.approve_annotation_consumed = false;
    }
}
