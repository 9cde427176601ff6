//! A selection's leftovers: the candidate variants (and, when no longer a reference, the fresh
//! baseline) still running once the selection has chosen or rolled back, removed traffic
//! first.

use super::ctx::Ctx;
use super::observations::{Action, SelectionAction};
use crate::api::Phase;

/// After the choice (or a rollback) candidate variants still seen are removed, every step
/// until they are gone — each once its traffic is back on the others (`gatewayAPI`: after
/// the choice the route is set to the fresh baseline's share alone; finishing, `RestoreRoute`
/// takes the variants out of it). The fresh baseline stays through the stages below 100 % as
/// their reference (docs/selection.md; `progress` keeps it at its size) and goes at 100 % —
/// no baseline serves there — and once the experiment promotes, rolls back or is deleted.
pub(super) fn remove_leftovers(cx: &mut Ctx) {
    let phase = cx.status.phase;
    if phase == Phase::Selecting {
        return;
    }
    let Some(obs) = cx.obs.selection.as_ref() else {
        return;
    };
    let router = cx.spec.traffic.router;
    let finishing = cx.obs.deleting() || !matches!(phase, Phase::Progressing | Phase::Paused);
    let fresh = &obs.fresh_baseline;
    let mut actions = Vec::new();
    let live: Vec<usize> = (0..obs.candidates.len())
        .filter(|&i| obs.candidates[i].deployment.is_some())
        .collect();
    let routed = live.iter().any(|&i| obs.candidates[i].share != 0);
    if !finishing && routed && router.uses_route() {
        actions.push(SelectionAction::SetWeights {
            candidates: Vec::new(),
            fresh_baseline: fresh.share,
        });
    }
    for i in live {
        if router.variant_traffic_back(obs.candidates[i].share) {
            actions.push(SelectionAction::RemoveVariant { index: i });
        }
    }
    let index = cx.status.stage_index.and_then(|i| usize::try_from(i).ok());
    let weight = index.map_or(100, |i| cx.stage_weight(i));
    let beside = super::split::fresh_baseline(cx.spec, cx.original(), weight).is_some();
    let unused = finishing || !beside;
    if unused && fresh.deployment.is_some() && router.variant_traffic_back(fresh.share) {
        actions.push(SelectionAction::RemoveFreshBaseline);
    }
    for a in actions.into_iter().map(Action::Selection) {
        if !cx.actions.contains(&a) {
            cx.actions.push(a);
        }
    }
}
