//! The fresh baseline beside the stages (docs/selection.md): a copy of the target's template
//! with pods as young as the candidate's, kept at its selection size below 100 % — on top of
//! the target's pods (`replicas`) or at its own route weight (`gatewayAPI`) — and judged
//! against; at 100 % no baseline serves, and it goes (`leftovers::remove_leftovers`).

use super::ctx::Ctx;
use super::observations::{Action, SelectionAction};
use super::split::fresh_baseline;

/// The fresh baseline beside a stage (docs/selection.md), as far as the split needs it.
pub(super) struct FreshBeside {
    /// Ready at its size and running the target's template (or none is wanted).
    pub(super) ready: bool,
    /// Its route share to set (`gatewayAPI`; 0 when none is wanted).
    pub(super) share: i32,
    /// Its share now is not that.
    pub(super) share_off: bool,
}

/// Asks for the fresh baseline a stage of `weight` percent keeps beside the candidate.
pub(super) fn beside(cx: &mut Ctx, weight: i32) -> FreshBeside {
    let wanted = fresh_baseline(cx.spec, cx.original(), weight);
    let seen = cx.obs.selection.as_ref().map(|s| s.fresh_baseline.clone());
    let seen = seen.unwrap_or_default();
    let Some(f) = wanted else {
        return FreshBeside {
            ready: true,
            share: 0,
            share_off: seen.share != 0,
        };
    };
    let pods = f.pods_per_variant;
    let ready = seen.applied(pods)
        && seen
            .deployment
            .as_ref()
            .is_some_and(|d| d.ready_replicas >= pods && d.rolled_out);
    // Re-sent only when not as wanted (see `select::apply`).
    if !seen.applied(pods) {
        cx.actions
            .push(Action::Selection(SelectionAction::EnsureFreshBaseline {
                replicas: pods,
            }));
    }
    FreshBeside {
        ready,
        share: f.share,
        share_off: seen.share != f.share,
    }
}
