//! Progressing and Paused: apply the current stage's split without ever dropping capacity,
//! start its clock when the split is in force, and advance when it has earned it.

use super::analysis;
use super::capacity::{self, Gate, CAPACITY_UNKNOWN};
use super::ctx::Ctx;
use super::deadline;
use super::external;
use super::finish;
use super::fresh;
use super::improvement;
use super::observations::{Action, EventType};
use super::pause::{self, Pause};
use super::readiness;
use super::split;
use super::timing::{self, POLL};
use super::validate::Timing;
use crate::api::reason::EventReason;
use crate::api::reason::{DecisionReason, HoldReason};
use crate::api::{Phase, RenderedServer, ANNOTATION_APPROVE};
use crate::traffic::Live;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub const AWAITING_APPROVAL: &str = HoldReason::AwaitingApproval.as_str();
pub const AWAITING_EXTERNAL_PROMOTION: &str = HoldReason::AwaitingExternalPromotion.as_str();
/// Decision reason when a stage's split was not in force within `spec.progressDeadline`.
pub const PROGRESS_DEADLINE_EXCEEDED: &str = DecisionReason::ProgressDeadlineExceeded.as_str();

/// Enters stage 1 — from Pending, or with a selection's winner — and says once what the
/// router can really give and whether the capacity gate is off.
pub fn start(cx: &mut Ctx, t: &Timing) {
    cx.enter_stage(0);
    if let Some(msg) = split::coarse_split(cx.spec, cx.original(), cx.sizing()) {
        cx.event(EventType::Normal, EventReason::CoarseSplit, msg);
    }
    let off = capacity::off_reason(cx.candidate(), t).filter(|_| cx.spec.stages.len() > 1);
    if let Some(why) = off {
        let msg = format!(
            "The capacity gate is off ({why}): each step is taken on the checks alone, without \
             predicting whether the candidate can carry it."
        );
        cx.event(EventType::Normal, EventReason::CapacityGateOff, msg);
    }
    run(cx, t);
}

pub fn run(cx: &mut Ctx, t: &Timing) {
    let old_pause = pause::stored(&cx.status);
    restart_if_candidate_changed(cx);
    let n = cx.spec.stages.len();
    let index = (cx.status.stage_index.unwrap_or(0).max(0) as usize).min(n - 1);
    if cx.status.stage_index != Some(index as i32) {
        // The spec lost stages mid-flight: continue at its last one.
        cx.status.stage_index = Some(index as i32);
        cx.status.stage = Some(format!("{}/{n}", index + 1));
    }
    let seen = cx.status.last_analysis_at.clone();
    let had_standby = readiness::has_standby(cx, index);
    let stage_end = cx
        .status
        .stage_started_at
        .as_ref()
        .and_then(|s| timing::add(s.0, t.stage(index)));
    if analysis::record(cx, index, stage_end) {
        return finish::roll_back(cx);
    }
    let loss = readiness::lost(cx, index);
    readiness::release_standby(cx, index, had_standby);
    let new_analysis = cx.status.last_analysis_at != seen;
    pause::lift_inconclusive_hold(cx);
    pause::lift_capacity_hold(cx, t, index);
    external::lift_gate_of_another_mode(cx);
    cx.status.planned_effective_weights =
        split::planned_effective_weights(cx.spec, cx.original(), cx.sizing());
    if cx.hold() == Some(HoldReason::AwaitingApproval) && !cx.spec.paused {
        if let Some(by) = pause::approve_promotion(cx) {
            let msg = format!("Approved by {by}: promoting the candidate into the target.");
            cx.start_promotion(DecisionReason::Approved, msg);
            return finish::promote(cx);
        }
    }
    if external::complete(cx) {
        return finish::promote(cx);
    }
    let mid_pause = pause::now(cx);
    if mid_pause != old_pause {
        pause::event(cx, mid_pause);
    }
    let resumed = old_pause == Some(Pause::ByUser) && !cx.spec.paused;
    let before_split = cx.actions.len();
    let mut in_force = apply_split(cx, index);
    readiness::warn(cx, loss);
    start_clock(cx, in_force);
    if deadline::missed(cx, t, in_force, resumed) {
        // The split this stage asked for is abandoned: the rollback's actions replace it.
        cx.actions.truncate(before_split);
        let msg = deadline::message(cx, index);
        cx.start_rollback(DecisionReason::ProgressDeadlineExceeded, msg);
        return finish::roll_back(cx);
    }
    // After the clock: which analyses belong to the stage depends on when it started.
    capacity::refresh(cx, t, index);
    let holding = cx.spec.paused || cx.hold().is_some();
    let mut waiting = false;
    if !holding && in_force && stage_earned(cx, t, index) {
        if index + 1 < n {
            match capacity::gate(cx, t, index, new_analysis) {
                Gate::Open => {
                    cx.enter_stage(index + 1);
                    in_force = apply_split(cx, index + 1);
                    start_clock(cx, in_force);
                }
                Gate::Closed => waiting = cx.hold().is_none(),
                Gate::RolledBack => {
                    // The split's actions give way to the rollback's; its Event stays.
                    let split: Vec<Action> = cx.actions.drain(before_split..).collect();
                    let events = split
                        .into_iter()
                        .filter(|a| matches!(a, Action::Event { .. }));
                    cx.actions.extend(events);
                    return finish::roll_back(cx);
                }
            }
        } else if improvement::after_the_last_stage(cx) {
            return;
        }
    }
    let new_pause = pause::now(cx);
    cx.status.phase = if new_pause.is_some() {
        Phase::Paused
    } else {
        Phase::Progressing
    };
    if new_pause != mid_pause {
        pause::event(cx, new_pause);
    }
    cx.update_variants();
    describe(cx, t, in_force, new_pause, waiting);
}

/// `spec.candidate` was edited mid-flight (the rendered config in status is not the spec's):
/// everything measured so far belongs to the old config, so the experiment starts again at
/// stage 1 with a fresh history, and `apply_split` re-applies the candidate.
fn restart_if_candidate_changed(cx: &mut Ctx) {
    let new = RenderedServer::from(cx.candidate());
    let Some(old) = cx.status.candidate.as_ref().map(|c| c.config.clone()) else {
        return;
    };
    if old == new {
        return;
    }
    // An analysis run for this reconcile measured the old config: seen, never counted.
    if let Some(a) = &cx.obs.analysis {
        cx.status.last_analysis_at = Some(a.record.at.clone());
    }
    let stage = cx.status.stage.clone().unwrap_or_default();
    let (from, to) = (old.summary(), new.summary());
    let what = if from == to {
        format!("{to} (command or args changed)")
    } else {
        to
    };
    cx.forget_measurements();
    // Promoted with another config, the target looks otherwise: `external::remember` records
    // it again.
    if let Some(o) = cx.status.original.as_mut() {
        o.promoted_template_hash = None;
    }
    cx.set_stage(0);
    let first = cx.status.stage.clone().unwrap_or_default();
    let msg = format!(
        "spec.candidate changed from {from} to {what} at stage {stage}: restarting at stage \
         {first} with a fresh history; the candidate is re-applied."
    );
    cx.event(EventType::Normal, EventReason::SpecChanged, msg);
}

/// The stage's clock starts the first time its split is seen in force.
fn start_clock(cx: &mut Ctx, in_force: bool) {
    if in_force && cx.status.stage_started_at.is_none() {
        cx.status.stage_started_at = Some(Time(cx.now()));
    }
}

/// Emits the actions that move towards stage `index`'s split; true when it is in force.
/// Order: the candidate grows first; the target shrinks (replicas) or the route shifts
/// (gatewayAPI) only once the candidate's pods are ready.
fn apply_split(cx: &mut Ctx, index: usize) -> bool {
    let Some(target) = &cx.obs.target else {
        return false;
    };
    let weight = cx.stage_weight(index);
    let router = cx.spec.traffic.router;
    let split = readiness::split(cx, index);
    let candidate = cx.obs.candidate.as_ref();
    let current = target.deployment.replicas;
    let ready = candidate.map_or(0, |c| c.ready_replicas);
    let live = Live {
        weight,
        original: cx.original(),
        baseline_replicas: current,
        baseline_ready: target.deployment.ready_replicas,
        candidate_ready: ready,
        effective_weight: cx.obs.effective_weight,
        started: cx.status.stage_started_at.is_some(),
    };
    // A candidate shrinks (a restart at stage 1, weights lowered in the spec) only once its
    // traffic is back on the baseline: the target ready at its share, or the route shifted.
    let traffic_back = router.traffic_back(&split, &live);
    let wanted_candidate = match candidate {
        Some(c) if c.replicas > split.candidate && !traffic_back => c.replicas,
        _ => split.candidate,
    };
    let stale = candidate.is_some() && !cx.obs.candidate_runs_spec_config;
    if candidate.map(|c| c.replicas) != Some(wanted_candidate) || cx.spec_changed || stale {
        cx.actions.push(Action::EnsureCandidate {
            replicas: wanted_candidate,
        });
    }
    let candidate_ready = ready >= split.candidate;
    let wanted = router.baseline_replicas(&split, &live);
    // Growing the baseline is always safe; shrinking it waits for the candidate.
    if current < wanted || (current > wanted && candidate_ready) {
        cx.actions.push(Action::ScaleTarget { replicas: wanted });
    }
    // In force means every candidate pod runs the spec's config at the stage's size, so
    // the stage clock and the analyses never measure pods of an older template.
    let candidate_done = candidate.is_some_and(|c| {
        c.replicas == split.candidate && c.rolled_out && cx.obs.candidate_runs_spec_config
    }) && candidate_ready;
    let fresh = fresh::beside(cx, weight);
    let apply = router.weight_to_apply(&split, &live);
    // The fresh baseline's route weight is set with the candidate's, once its pods are ready.
    let fresh_off = router.uses_route() && candidate_ready && fresh.ready && fresh.share_off;
    if let Some(candidate_weight) = apply.or(fresh_off.then_some(weight)) {
        cx.actions.push(Action::SetRouteWeights {
            candidate_weight,
            fresh_baseline: if fresh.ready { fresh.share } else { 0 },
        });
    }
    let fresh_in_force = fresh.ready && !(router.uses_route() && fresh.share_off);
    router.in_force(&split, &live, candidate_done) && fresh_in_force
}

/// The stage's duration has passed since its split was in force, at least one analysis in it
/// passed, and the latest one passed. Missing data (Inconclusive) never satisfies this.
/// `judge: sequential` ends it early once the latest analysis passed with every sequential
/// check shown no worse, after a third of its duration (the per-interval checks' time).
/// A last stage with a standby needs a second pass: the first ran beside the standby (75 % of
/// traffic on 3 replicas), and promoting on it would skip 100 % altogether — which a stage
/// ending early, or a first pass after the stage's duration, did.
fn stage_earned(cx: &Ctx, t: &Timing, index: usize) -> bool {
    let st = &cx.status;
    let Some(started) = &st.stage_started_at else {
        return false;
    };
    let needed = if readiness::keeps_standby(cx, index) {
        2
    } else {
        1
    };
    let passed =
        st.stage_passed_analyses >= needed && st.last_verdict == Some(crate::api::Verdict::Pass);
    let ended = timing::add(started.0, t.stage(index)).is_some_and(|end| cx.now() >= end);
    passed && (ended || early_end(cx, t, index, started.0))
}

/// `judge: sequential`'s early end of a stage (see `stage_earned`).
fn early_end(cx: &Ctx, t: &Timing, index: usize, started: jiff::Timestamp) -> bool {
    let minimum = (t.stage(index) / 3).max(t.interval);
    let long_enough = timing::add(started, minimum).is_some_and(|at| cx.now() >= at);
    let latest = cx.status.analyses.last().filter(|a| a.at.0 >= started);
    long_enough && latest.is_some_and(|a| analysis::shown_no_worse(&a.checks))
}

/// The status message, condition reason and requeue time for the state reached. `waiting`:
/// the stage earned its step but the capacity gate cannot predict it yet.
fn describe(cx: &mut Ctx, t: &Timing, in_force: bool, paused: Option<Pause>, waiting: bool) {
    let stage = cx.status.stage.clone().unwrap_or_default();
    let planned = cx.status.planned_weight;
    let effective = cx.obs.effective_weight;
    let index = cx.status.stage_index.unwrap_or(0).max(0) as usize;
    if let Some(next) = timing::next_analysis_at(&cx.status, t.interval) {
        let d = timing::until(cx.now(), next);
        cx.wait(d);
    }
    let msg = if !in_force || cx.status.stage_started_at.is_none() {
        cx.wait(POLL);
        let c = cx.obs.candidate.clone().unwrap_or_default();
        let wanted = readiness::split(cx, index).candidate;
        format!(
            "Stage {stage}: shifting to {planned}% ({} of {wanted} candidate pods ready, {effective}% \
             of traffic now).",
            c.ready_replicas
        )
    } else {
        let started = cx.status.stage_started_at.as_ref().map(|s| s.0);
        let end = started.and_then(|s| timing::add(s, t.stage(index)));
        if let (Some(end), None) = (end, &paused) {
            if cx.now() < end {
                let d = timing::until(cx.now(), end);
                cx.wait(d);
            }
        }
        let passed = cx.status.stage_passed_analyses;
        let standby = if readiness::has_standby(cx, index) {
            "; one baseline pod kept as a standby until an analysis at 100% passes"
        } else {
            ""
        };
        let base = format!(
            "Stage {stage} at {effective}% of traffic ({}{standby}); {passed} passed analyses in \
             this stage.",
            pods(cx)
        );
        match &paused {
            Some(Pause::Hold(HoldReason::InsufficientCapacity)) => format!(
                "{base} {} Annotate {ANNOTATION_APPROVE}=true to take the step anyway, or abort \
                 to roll back.",
                pause::gate_message(cx)
            ),
            Some(Pause::Hold(HoldReason::AwaitingExternalPromotion)) => {
                format!("{base} {}", external::status_message(cx))
            }
            Some(Pause::Hold(HoldReason::AwaitingApproval)) if cx.status.improvement.is_some() => {
                format!(
                    "{base} minImprovement: {}",
                    cx.status.improvement.clone().unwrap_or_default()
                )
            }
            _ if waiting => format!(
                "{base} The capacity gate holds the step: {}",
                pause::gate_message(cx)
            ),
            _ => format!("{base}{}", gate_preview(cx, index)),
        }
    };
    cx.status.message = Some(match &paused {
        Some(r) => format!("Paused ({}). {msg}", r.as_str()),
        None => msg,
    });
    if let Some(r) = paused {
        cx.reason = r.as_str().to_string();
    } else if waiting {
        cx.reason = CAPACITY_UNKNOWN.into();
    }
}

/// ` Capacity gate for stage 3/3: predicted utilization 62% (max 85%).` while the current
/// stage has a prediction for its step.
fn gate_preview(cx: &Ctx, index: usize) -> String {
    let Some(g) = cx.status.capacity_gate.as_ref() else {
        return String::new();
    };
    match g.predicted_utilization {
        Some(u) if g.stage_index == index as i32 + 1 => format!(
            " Capacity gate for stage {}: predicted utilization {:.0}% (max {:.0}%).",
            g.stage,
            u * 100.0,
            g.max_utilization * 100.0
        ),
        _ => String::new(),
    }
}

fn pods(cx: &Ctx) -> String {
    let c = cx.obs.candidate.as_ref().map_or(0, |c| c.ready_replicas);
    let b = cx
        .obs
        .target
        .as_ref()
        .map_or(0, |t| t.deployment.ready_replicas);
    format!("{c} candidate and {b} baseline pods ready")
}
