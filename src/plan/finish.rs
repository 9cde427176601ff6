//! The ends of an experiment: promoting, rolling back, and deletion (finalizer). Each waits for
//! the baseline (or the promoted target) to serve at full strength before the candidate goes.

use crate::api::reason::EventReason;
use std::time::Duration;

use super::ctx::Ctx;
use super::observations::{Action, EventType};
use super::timing::{add, until, POLL};
use crate::api::reason::DecisionReason;
use crate::api::{parse_duration, Phase, Promotion, RenderedServer};

/// `spec.progressDeadline`'s default, for a deletion whose spec has an unparseable one.
const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// Promoting: write the candidate config into the target and scale it back to its original
/// size; once it is rolled out, restore the route (gatewayAPI), then remove the candidate.
/// With `promotion: external` Git wrote it: the template is never written here.
pub fn promote(cx: &mut Ctx) {
    edited_while_promoting(cx);
    cx.update_variants();
    let Some(target) = &cx.obs.target else {
        return;
    };
    let original = cx.original();
    let router = cx.spec.traffic.router;
    let t = &target.deployment;
    if !target.runs_candidate_config {
        if cx.spec.promotion == Promotion::External {
            super::external::reverted(cx);
            return roll_back(cx);
        }
        cx.actions.push(Action::PromoteTarget);
    }
    if t.replicas != original {
        cx.actions.push(Action::ScaleTarget { replicas: original });
    }
    if !(target.runs_candidate_config && t.rolled_out && t.ready_replicas >= original) {
        cx.status.message = Some(format!(
            "Promoting: rolling out the candidate config in the target ({} of {original} pods \
             ready).",
            t.ready_replicas
        ));
        return cx.wait(POLL);
    }
    if router.needs_restore(cx.route_traffic()) {
        cx.actions.push(Action::RestoreRoute);
        cx.status.message =
            Some("Promoting: the target runs the candidate config; restoring the route.".into());
        return cx.wait(POLL);
    }
    if cx.obs.candidate.is_some() {
        cx.actions.push(Action::RemoveCandidate);
        cx.status.message =
            Some("Promoting: the target runs the candidate config; removing the candidate.".into());
        return cx.wait(POLL);
    }
    cx.status.phase = Phase::Succeeded;
    let msg = format!(
        "Promoted: Deployment {} now runs {}.",
        cx.spec.target_ref.name,
        cx.promoted_candidate().summary()
    );
    cx.status.message = Some(msg.clone());
    cx.event(EventType::Normal, EventReason::Succeeded, msg);
}

/// `spec.candidate` edited after the decision to promote: the judged config is promoted all
/// the same (a config no stage judged never lands), and the edit is said once.
fn edited_while_promoting(cx: &mut Ctx) {
    let judged = RenderedServer::from(cx.promoted_candidate());
    let now = RenderedServer::from(cx.candidate());
    if !cx.spec_changed || judged == now {
        return;
    }
    let msg = format!(
        "spec.candidate changed to {} while promoting: the judged config {} is promoted; \
         run a new experiment for the new one.",
        now.summary(),
        judged.summary()
    );
    cx.event(EventType::Warning, EventReason::SpecChanged, msg);
}

/// Rolling back: restore the baseline first (route, replicas) and wait until it is ready at
/// its original size; only then remove the candidate. With the target gone, or being deleted
/// itself, there is nothing to restore, so the candidate is removed at once.
pub fn roll_back(cx: &mut Ctx) {
    cx.update_variants();
    let route_restored = !cx.spec.traffic.router.needs_restore(cx.route_traffic());
    if !route_restored {
        cx.actions.push(Action::RestoreRoute);
    }
    let original = cx.status.original.as_ref().map(|o| o.replicas);
    let target = cx.obs.target.as_ref().filter(|t| !t.deleting);
    if let (Some(target), Some(original)) = (target, original) {
        let t = &target.deployment;
        if t.replicas != original {
            cx.actions.push(Action::ScaleTarget { replicas: original });
        }
        if t.ready_replicas < original || !route_restored {
            cx.status.message = Some(format!(
                "Rolling back: restoring the baseline ({} of {original} pods ready) before \
                 removing the candidate.",
                t.ready_replicas
            ));
            return cx.wait(POLL);
        }
    }
    if cx.obs.candidate.is_some() {
        cx.actions.push(Action::RemoveCandidate);
        cx.status.message =
            Some("Rolling back: the baseline is restored; removing the candidate.".into());
        return cx.wait(POLL);
    }
    cx.status.phase = Phase::RolledBack;
    let why = cx
        .status
        .decision
        .as_ref()
        .map(|d| d.message.clone())
        .unwrap_or_default();
    let msg = format!("Rolled back: the baseline serves all traffic. {why}")
        .trim_end()
        .to_string();
    cx.status.message = Some(msg.clone());
    cx.event(EventType::Warning, EventReason::RolledBack, msg);
}

/// The experiment is being deleted: restore the baseline like a rollback, then release the
/// finalizer. Nothing to restore (finished, or never started) releases at once.
///
/// A baseline that cannot get ready (its pods unschedulable, the cluster out of room) holds
/// the deletion for `spec.progressDeadline` from the deletion timestamp, not for ever: a
/// deletion nobody can complete — a namespace stuck in Terminating — is worse. Then it
/// releases anyway with a Warning `BaselineNotRestored` naming the ready count, but never
/// takes serving pods with it: the Deployments beside the target that have ready pods are let
/// go of (`Action::KeepServing`) and keep serving until a person removes them. When nothing
/// beside the target has a ready pod, no traffic depends on the candidate and the finalizer is
/// released at once, the target's restore asked for on the way out.
pub fn delete(cx: &mut Ctx) {
    // The whole namespace goes: the target, its Services and the route with it. Restoring
    // would only write statuses and Events the terminating namespace refuses.
    if cx.obs.namespace_terminating {
        cx.release = true;
        return;
    }
    let phase = cx.status.phase;
    let nothing_created =
        phase == Phase::Pending && cx.obs.candidate.is_none() && cx.status.original.is_none();
    if phase.is_terminal() || nothing_created {
        cx.release = true;
        return;
    }
    let said = cx.status.message.clone();
    let msg = "The experiment is being deleted; restoring the baseline.".to_string();
    cx.start_rollback(DecisionReason::Deleted, msg);
    roll_back(cx);
    cx.release = cx.status.phase == Phase::RolledBack;
    if !cx.release && cx.ready_beside_target() == 0 {
        // Nothing but the target serves (the candidate crash-looping, unschedulable, never
        // started): removing the candidate loses no traffic, and waiting for a target that may
        // never get ready would only hold the deletion for the whole deadline. roll_back has
        // asked for the target's size and route already; they are written before the release.
        let ready = cx
            .obs
            .target
            .as_ref()
            .map_or(0, |t| t.deployment.ready_replicas);
        cx.status.message = Some(format!(
            "Deleted: nothing but the target served (the candidate had no ready pods), so the \
             candidate goes with the experiment at once; the target is back at {} pods ({ready} \
             ready).",
            cx.original()
        ));
        cx.release = true;
        return;
    }
    if !cx.release {
        give_up_waiting(cx, said);
    }
}

/// Past `spec.progressDeadline` since the deletion was asked for: release without the
/// baseline; before it, look again by then at the latest. `said`: the status message before
/// this step (the Warning is sent once, not again for a release the apiserver has not seen).
fn give_up_waiting(cx: &mut Ctx, said: Option<String>) {
    let Some(since) = cx.obs.deleting_since else {
        return;
    };
    // Unparseable (the spec is refused elsewhere): the default deadline.
    let limit = parse_duration("spec.progressDeadline", &cx.spec.progress_deadline)
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE);
    let Some(end) = add(since, limit) else {
        return;
    };
    if cx.obs.now < end {
        let left = until(cx.obs.now, end);
        return cx.wait(left.min(POLL));
    }
    let original = cx.original();
    let ready = cx
        .obs
        .target
        .as_ref()
        .map_or(0, |t| t.deployment.ready_replicas);
    // Reached only with ready pods beside the target (`delete` releases at once otherwise):
    // removing them now would drop what the target cannot take over, so they stay, unowned.
    // Unless the target is being deleted too: then the app goes, as asked.
    let target_stays = cx.obs.target.as_ref().is_some_and(|t| !t.deleting);
    let kept = if target_stays {
        cx.actions.push(Action::KeepServing);
        format!(
            "its {} ready pod(s) beside the target keep serving: Deployment {} (and any other \
             of the experiment's with ready pods) is no longer the experiment's, annotated \
             concurrency.dev/kept-from — delete it once the target is ready",
            cx.ready_beside_target(),
            crate::workload::candidate_name(&cx.spec.target_ref.name)
        )
    } else {
        "its candidate removed as asked (the target is being deleted too)".to_string()
    };
    let msg = format!(
        "Deleted before the baseline was restored: the target has {ready} of {original} pods \
         ready {} after the deletion (spec.progressDeadline); the experiment is released and \
         {kept}.",
        cx.spec.progress_deadline
    );
    if said.as_deref() != Some(msg.as_str()) {
        cx.event(
            EventType::Warning,
            EventReason::BaselineNotRestored,
            msg.clone(),
        );
    }
    cx.status.message = Some(msg);
    cx.release = true;
}
