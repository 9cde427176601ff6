//! gatewayAPI: a variant's pods go only `spec.traffic.scaleDownDelay` after the route last
//! changed. The HTTPRoute is written at once, but the Gateway's data plane applies it a moment
//! later; pods removed in between answer 503s (24 of 6,569 requests once here, when a selection
//! eliminated a candidate). The replicas router needs no delay: there the pods *are* the split.
//!
//! One place for every removal (the candidate at promotion, rollback and deletion, an
//! eliminated or unchosen variant, the fresh baseline): the handlers decide what goes, and
//! `hold` keeps it until the route has settled.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ctx::Ctx;
use super::observations::{Action, SelectionAction};
use super::timing::{add, until};
use crate::api::{format_duration, parse_duration, DEFAULT_SCALE_DOWN_DELAY};

/// `spec.traffic.scaleDownDelay`, its default when unset or unparseable (refused elsewhere).
pub fn delay(traffic: &crate::api::Traffic) -> Duration {
    let default = || parse_duration("", DEFAULT_SCALE_DOWN_DELAY).unwrap_or_default();
    traffic
        .scale_down_delay
        .as_deref()
        .map_or_else(default, |d| {
            parse_duration("spec.traffic.scaleDownDelay", d).unwrap_or_else(|_| default())
        })
}

fn changes_route(a: &Action) -> bool {
    matches!(
        a,
        Action::SetRouteWeights { .. }
            | Action::RestoreRoute
            | Action::Selection(SelectionAction::SetWeights { .. })
    )
}

fn removes_pods(a: &Action) -> bool {
    matches!(
        a,
        Action::RemoveCandidate
            | Action::Selection(
                SelectionAction::RemoveVariant { .. } | SelectionAction::RemoveFreshBaseline
            )
    )
}

/// Stamps a route change of this step, and holds this step's removals until the delay after
/// the last one has passed (then they are asked for again: every handler repeats a removal
/// until it is seen done). Returns whether something was held.
pub(super) fn hold(cx: &mut Ctx) -> bool {
    if !cx.spec.traffic.router.uses_route() {
        return false;
    }
    let now = cx.obs.now;
    if cx.actions.iter().any(changes_route) {
        cx.status.route_changed_at = Some(Time(now));
    }
    let Some(changed) = cx.status.route_changed_at.as_ref().map(|t| t.0) else {
        return false;
    };
    let delay = delay(&cx.spec.traffic);
    let Some(end) = add(changed, delay) else {
        return false;
    };
    if now >= end || !cx.actions.iter().any(removes_pods) {
        return false;
    }
    cx.actions.retain(|a| !removes_pods(a));
    let note = format!(
        " Its pods stay until {} ({} after the route changed, spec.traffic.scaleDownDelay), \
         so the Gateway has stopped sending them requests.",
        end.strftime("%H:%M:%SZ"),
        format_duration(delay)
    );
    let message = cx.status.message.get_or_insert_with(String::new);
    if !message.ends_with(&note) {
        message.push_str(&note);
    }
    cx.wait(until(now, end));
    true
}
