//! `Selecting` (docs/selection.md): every surviving candidate and the fresh baseline run at
//! once on equal shares; each interval judges every candidate against the fresh baseline, a
//! candidate failing more than `failureLimit` analyses is eliminated on its own (its traffic
//! back on the baseline, its pods removed, an Event); after `selection.duration` the
//! objective picks the winner (`ranking`), which then walks the stages as the single
//! candidate. No survivor rolls back (`NoCandidatePassed`).
//!
//! The target is never scaled here (`traffic::Router::selection_split`): the variants come on
//! top of it, so capacity never drops below the baseline's while they come and go.

use crate::api::reason::EventReason;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ctx::Ctx;
use super::elimination::{record, LOW_SIGNAL_UTILIZATION};
use super::observations::{Action, EventType, SelectionAction};
use super::ranking::{choose, explain, rank, show};
use super::validate::Timing;
use super::{finish, progress, timing};
use crate::api::reason::DecisionReason;
use crate::api::{
    parse_percent, Phase, RankEntry, RenderedServer, SelectionStatus, SelectionVariant, Verdict,
    DEFAULT_TOLERANCE,
};

/// Significance level of the choice when `analysis.statistical` does not set one.
pub const DEFAULT_ALPHA: f64 = 0.05;
pub const CANDIDATE_CHOSEN: &str = EventReason::CandidateChosen.as_str();

/// Enters `Selecting` from Pending: one entry per candidate, nothing measured yet.
pub(super) fn enter(cx: &mut Ctx) {
    let variants = cx
        .spec
        .candidate_list()
        .iter()
        .enumerate()
        .map(|(i, c)| SelectionVariant {
            index: i as i32,
            summary: c.summary(),
            config: RenderedServer::from(c),
            ..Default::default()
        })
        .collect();
    cx.status.selection = Some(SelectionStatus {
        variants,
        ..Default::default()
    });
    cx.status.phase = Phase::Selecting;
    cx.status.stage_entered_at = Some(Time(cx.now()));
    let list: Vec<String> = cx
        .spec
        .candidate_list()
        .iter()
        .map(|c| c.summary())
        .collect();
    let weight = cx.spec.selection_or_default().weight;
    let msg = format!(
        "Selecting among {}: {weight}% of traffic each, and as much to a fresh baseline.",
        list.join(", ")
    );
    cx.event(EventType::Normal, EventReason::SelectionStarted, msg);
}

/// Decides to roll back and starts at once, as every handler does.
fn roll_back(cx: &mut Ctx, reason: DecisionReason, msg: String) {
    cx.start_rollback(reason, msg);
    finish::roll_back(cx);
}

fn alive(st: &SelectionStatus) -> Vec<usize> {
    st.variants
        .iter()
        .filter(|v| v.eliminated.is_none())
        .filter_map(|v| usize::try_from(v.index).ok())
        .collect()
}

pub(super) fn run(cx: &mut Ctx, t: &Timing) {
    restart_if_candidates_changed(cx);
    if cx.status.selection.is_none() {
        enter(cx);
    }
    // The target's and the fresh baseline's pods as they are now.
    cx.update_variants();
    if let Some(a) = cx.obs.selection.as_ref().and_then(|s| s.analysis.as_ref()) {
        record(cx, a);
    }
    let survivors = alive(cx.selection());
    if survivors.is_empty() {
        return no_survivor(cx);
    }
    let sel = cx.spec.selection_or_default();
    let router = cx.spec.traffic.router;
    let split =
        match router.selection_split(cx.original(), sel.weight, survivors.len() as i32, true) {
            Ok(s) => s,
            Err(e) => return roll_back(cx, DecisionReason::InvalidSpec, format!("{e}.")),
        };
    let in_force = apply(cx, &survivors, split.pods_per_variant, split.share);
    if !in_force {
        let deadline = cx
            .status
            .stage_entered_at
            .as_ref()
            .and_then(|s| timing::add(s.0, t.progress_deadline));
        if deadline.is_some_and(|end| cx.now() >= end) {
            let msg = format!(
                "The selection's split ({}% to each of {} variants) was not in force within \
                 spec.progressDeadline ({}); restoring the baseline.",
                split.share,
                survivors.len() + 1,
                cx.spec.progress_deadline
            );
            return roll_back(cx, DecisionReason::ProgressDeadlineExceeded, msg);
        }
        cx.status.message = Some("Waiting for every variant's share to be in force.".into());
        if let Some(end) = deadline {
            cx.wait(timing::until(cx.now(), end));
        }
        return cx.wait(timing::POLL);
    }
    let now = cx.now();
    let started = cx.selection().started_at.get_or_insert(Time(now)).0;
    let duration = t.selection.unwrap_or(t.interval);
    let ends = started + duration;
    if now < ends {
        cx.status.message = Some(format!(
            "Selecting among {} candidates ({}% each); the choice is due at {ends}.",
            survivors.len(),
            split.share
        ));
        let left = Duration::try_from(ends.duration_since(now)).unwrap_or_default();
        return cx.wait(left.min(t.interval));
    }
    let signal = cx.selection().signal_analyses;
    if sel.require_signal && signal == 0 {
        cx.status.message = Some(format!(
            "Holding the choice: every variant ran below {:.0}% of its estimated capacity in \
             every analysis (low signal), and selection.requireSignal waits for more traffic.",
            LOW_SIGNAL_UTILIZATION * 100.0
        ));
        cx.reason = "LowSignal".into();
        return cx.wait(t.interval);
    }
    decide(cx, t);
}

/// `spec.candidates` was edited mid-selection: what was measured belongs to the old list, so
/// the selection starts again with a fresh history (the shell re-renders changed variants;
/// `apply` removes those no longer listed).
fn restart_if_candidates_changed(cx: &mut Ctx) {
    let Some(old) = cx.status.selection.as_ref() else {
        return;
    };
    let was: Vec<&RenderedServer> = old.variants.iter().map(|v| &v.config).collect();
    let now: Vec<RenderedServer> = cx
        .spec
        .candidate_list()
        .iter()
        .map(RenderedServer::from)
        .collect();
    if was.len() == now.len() && was.iter().zip(&now).all(|(a, b)| *a == b) {
        return;
    }
    // An analysis run for this reconcile measured the old list: seen, never counted.
    if let Some(a) = cx.obs.selection.as_ref().and_then(|s| s.analysis.as_ref()) {
        cx.status.last_analysis_at = Some(Time(a.at));
    }
    let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(", ");
    let msg = format!(
        "spec.candidates changed from [{}] to [{}]: restarting the selection with a fresh \
         history.",
        list(&mut was.iter().map(|c| c.summary())),
        list(&mut now.iter().map(|c| c.summary()))
    );
    cx.forget_measurements();
    cx.status.selection = None;
    cx.event(EventType::Normal, EventReason::SpecChanged, msg);
}

/// Ensures every survivor and the fresh baseline at `pods` each, the route weights, and the
/// removal of eliminated candidates whose traffic is gone. True when every share is in force.
fn apply(cx: &mut Ctx, survivors: &[usize], pods: i32, share: i32) -> bool {
    let router = cx.spec.traffic.router;
    let Some(obs) = cx.obs.selection.as_ref() else {
        return false;
    };
    let ready = |v: &super::observations::VariantObservation| {
        v.applied(pods)
            && v.deployment
                .as_ref()
                .is_some_and(|d| d.ready_replicas >= pods && d.rolled_out)
    };
    // Applied again only when it is not as wanted: a variant whose pods are still starting
    // (or cannot be scheduled) is waited for, not re-sent — 100 waiting selections re-applying
    // 4 Deployments each cost 167 mCPU and a 512 ms reconcile p50 here.
    let mut actions = Vec::new();
    let mut all_ready = ready(&obs.fresh_baseline);
    if !obs.fresh_baseline.applied(pods) {
        actions.push(SelectionAction::EnsureFreshBaseline { replicas: pods });
    }
    for &i in survivors {
        let v = obs.candidates.get(i).cloned().unwrap_or_default();
        all_ready &= ready(&v);
        if !v.applied(pods) {
            actions.push(SelectionAction::EnsureVariant {
                index: i,
                replicas: pods,
            });
        }
    }
    let shares_ok = |v: &super::observations::VariantObservation| {
        if router.splits_by_pods() {
            v.share > 0
        } else {
            v.share == share
        }
    };
    let mut in_force = all_ready && shares_ok(&obs.fresh_baseline);
    for &i in survivors {
        let v = obs.candidates.get(i).cloned().unwrap_or_default();
        in_force &= shares_ok(&v);
    }
    // Traffic moves only onto ready pods, and off an eliminated candidate before its pods go.
    let eliminated: Vec<usize> = (0..obs.candidates.len())
        .filter(|i| !survivors.contains(i))
        .collect();
    let stale_route = eliminated
        .iter()
        .any(|&i| obs.candidates.get(i).is_some_and(|v| v.share != 0));
    if router.uses_route() && all_ready && (!in_force || stale_route) {
        actions.push(SelectionAction::SetWeights {
            candidates: survivors.iter().map(|&i| (i, share)).collect(),
            fresh_baseline: share,
        });
    }
    for i in eliminated {
        let v = obs.candidates.get(i).cloned().unwrap_or_default();
        if v.deployment.is_some() && router.variant_traffic_back(v.share) {
            actions.push(SelectionAction::RemoveVariant { index: i });
        }
    }
    cx.actions
        .extend(actions.into_iter().map(Action::Selection));
    in_force
}

fn no_survivor(cx: &mut Ctx) {
    let variants = selection_variants(cx);
    let ranking = rank(cx.spec.candidate_list(), baseline_config(cx), &variants);
    let why: Vec<String> = variants
        .iter()
        .map(|v| {
            let checks = v
                .eliminated
                .as_ref()
                .map_or(String::new(), |e| e.checks.join(", "));
            format!("{} ({checks})", v.summary)
        })
        .collect();
    cx.selection().ranking = ranking;
    let msg = format!(
        "No candidate passed: every one was eliminated against the fresh baseline ({}); \
         restoring the baseline.",
        why.join("; ")
    );
    roll_back(cx, DecisionReason::NoCandidatePassed, msg);
}

fn selection_variants(cx: &Ctx) -> Vec<SelectionVariant> {
    cx.status
        .selection
        .as_ref()
        .map(|s| s.variants.clone())
        .unwrap_or_default()
}

fn baseline_config<'c>(cx: &'c Ctx) -> Option<&'c crate::api::RenderedServer> {
    cx.obs
        .target
        .as_ref()
        .and_then(|t| t.baseline.as_ref())
        .or(cx.status.baseline.as_ref().map(|b| &b.config))
}

/// The choice: rank, pick, explain, remove every candidate variant (the winner walks the
/// stages as `<target>-candidate`, from a target that kept all its pods), enter stage 1.
fn decide(cx: &mut Ctx, t: &Timing) {
    let sel = cx.spec.selection_or_default();
    let tolerance = parse_percent(
        "spec.selection.tolerance",
        sel.tolerance.as_deref().unwrap_or(DEFAULT_TOLERANCE),
    )
    .unwrap_or(0.05);
    let alpha = cx
        .spec
        .analysis
        .statistical
        .as_ref()
        .map_or(DEFAULT_ALPHA, |s| s.alpha);
    let variants = selection_variants(cx);
    let mut ranking = rank(cx.spec.candidate_list(), baseline_config(cx), &variants);
    let left_out = leave_out_unfit(cx, t, &mut ranking);
    let samples = |i: i32| {
        variants
            .iter()
            .find(|v| v.index == i)
            .map_or(&[][..], |v| v.objective_samples.as_slice())
    };
    let Some(choice) = choose(&ranking, tolerance, alpha, samples) else {
        cx.selection().ranking = ranking;
        if !left_out.is_empty() {
            let msg = format!(
                "No candidate can carry the rollout at the load the selection measured. {} \
                 Restoring the baseline.",
                left_out.join(" ")
            );
            return roll_back(cx, DecisionReason::InsufficientCapacity, msg);
        }
        let msg = "No candidate passed: the survivors were never measured (no analysis with \
                   enough requests and the objective); restoring the baseline."
            .to_string();
        return roll_back(cx, DecisionReason::NoCandidatePassed, msg);
    };
    let mut msg = explain(&ranking, &choice, sel.objective.minimize, tolerance, alpha);
    for note in &left_out {
        msg.push(' ');
        msg.push_str(note);
    }
    let st = cx.selection();
    if st.low_signal_analyses > 0 {
        msg.push_str(&format!(
            " {} of {} analyses were low signal (every variant below {:.0}% of its capacity): \
             latency and queue time could not tell the configs apart there.",
            st.low_signal_analyses,
            st.low_signal_analyses + st.signal_analyses,
            LOW_SIGNAL_UTILIZATION * 100.0
        ));
    }
    st.ranking = ranking;
    st.winner = Some(choice.winner);
    st.message = Some(msg.clone());
    cx.event(EventType::Normal, EventReason::CandidateChosen, msg);
    super::first_step::record_stage_one(cx, t);
    // The candidate variants go in `remove_leftovers`, traffic first.
    cx.status.phase = Phase::Progressing;
    cx.update_variants();
    progress::start(cx, t);
}

/// Survivors that could not carry the rollout at the measured load (`first_step::cannot_carry`)
/// do not win: Fail in the ranking with the reason, placed after the survivors that can; one
/// sentence each for the decision message. The objective alone would pick a config the
/// capacity gate then refuses before stage 1 (the demo's Puma 1×1: least memory, 115 % of its
/// capacity at stage 1).
fn leave_out_unfit(cx: &Ctx, t: &Timing, ranking: &mut [RankEntry]) -> Vec<String> {
    let minimize = cx.spec.selection_or_default().objective.minimize;
    let mut notes = Vec::new();
    for e in ranking.iter_mut().filter(|e| e.verdict == Verdict::Pass) {
        let Some(why) = super::first_step::cannot_carry(cx, t, e.index) else {
            continue;
        };
        let objective = e
            .objective
            .map_or(String::new(), |v| format!(" ({})", show(minimize, v)));
        notes.push(format!("Left out {}{objective}: {why}", e.summary));
        e.verdict = Verdict::Fail;
        e.reason = Some(format!("cannot carry the rollout: {why}"));
    }
    // Stable: the survivors that can carry it first, the rest in their order.
    ranking.sort_by_key(|e| e.verdict != Verdict::Pass);
    notes
}
