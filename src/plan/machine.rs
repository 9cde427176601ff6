//! The entry point: `step` routes one reconcile's observations to the phase handlers (the
//! context they share is `ctx`), and the checks that apply in every phase.

use crate::api::reason::EventReason;
use std::time::Duration;

use super::ctx::Ctx;
use super::observations::{EventType, Observations, Step};
use super::validate::{validate, Timing};
use super::{approval, external, finish, leftovers, progress, retry, scale_down, select, timing};
use crate::api::reason::DecisionReason;
use crate::api::{
    ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, OriginalState, Phase, TargetScale,
};
use crate::workload::TemplateFingerprint;

/// One reconcile: what to do and the status to write. Pure, level-triggered and idempotent:
/// every action is repeated until its effect shows up in the observations, so the shell may
/// write the returned status before running the actions; replaying the same observations on
/// the returned status emits no new events.
pub fn step(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
    obs: &Observations,
) -> Step {
    let mut cx = Ctx::new(spec, status, obs);
    run(&mut cx);
    leftovers::remove_leftovers(&mut cx);
    cx.removal_held = scale_down::hold(&mut cx);
    approval::settle(&mut cx);
    retry::settle(&mut cx);
    remember_route(&mut cx);
    external::remember(&mut cx);
    remember_baselines(&mut cx);
    let mut out = cx.finish();
    out.status.bound();
    out
}

/// Both baselines' values of the latest interval that measured them (a replay of an older
/// one changes nothing); a fresh baseline seen gone is no longer shown, whatever the phase.
fn remember_baselines(cx: &mut Ctx) {
    let gone = cx
        .obs
        .selection
        .as_ref()
        .is_none_or(|s| s.fresh_baseline.deployment.is_none());
    if let Some(fresh) = cx.status.fresh_baseline.as_mut().filter(|_| gone) {
        fresh.variant = None;
    }
    let Some(new) = &cx.obs.baselines else {
        return;
    };
    let fresh = cx
        .status
        .fresh_baseline
        .get_or_insert_with(Default::default);
    let stored = fresh.measured.as_ref().map(|m| m.at.0);
    if stored.is_none_or(|at| new.at.0 > at) {
        fresh.measured = Some(new.clone());
    }
}

/// The route's backendRefs as they were before the experiment touched them, kept once (with
/// the first status that has `original`) so a rollback or deletion can put them back exactly.
/// The shell reports them only while the route is not split: a split route is never recorded.
fn remember_route(cx: &mut Ctx) {
    let (Some(original), Some(refs)) = (cx.status.original.as_mut(), &cx.obs.route_backend_refs)
    else {
        return;
    };
    if original.route_backend_refs.is_none() {
        original.route_backend_refs = Some(refs.clone());
    }
}

fn run(cx: &mut Ctx) {
    follow_target_scale(cx);
    follow_load_at_full(cx);
    if cx.obs.deleting() {
        return finish::delete(cx);
    }
    // The only way out of a terminal phase: a retried experiment goes on as Pending.
    retry::handle(cx);
    let phase = cx.status.phase;
    if phase.is_terminal() {
        return;
    }
    // Before the spec: a renamed app container is the target's change, not a spec error.
    target_changed(cx);
    if in_the_way(cx) {
        return;
    }
    let timing = match validate(cx.spec, cx.obs.spec_error.as_deref()) {
        Ok(t) => Some(t),
        Err(msg) => {
            match phase {
                Phase::Pending => return invalid(cx, msg),
                Phase::Selecting | Phase::Progressing | Phase::Paused => cx.start_rollback(
                    DecisionReason::InvalidSpec,
                    format!("The spec became invalid: {msg}."),
                ),
                // Promotion and rollback need no durations; finish them.
                _ => {}
            }
            None
        }
    };
    // An abort annotation a retry spent aborts nothing more; `spec.abort` always does.
    let abort = cx.obs.abort_requested && (cx.spec.abort || !cx.status.abort_annotation_consumed);
    if abort
        && matches!(
            cx.status.phase,
            Phase::Pending | Phase::Selecting | Phase::Progressing | Phase::Paused
        )
    {
        cx.start_rollback(
            DecisionReason::Aborted,
            "Aborted on request; restoring the baseline.".into(),
        );
    }
    if cx.obs.target.is_none() && !matches!(cx.status.phase, Phase::Pending | Phase::RollingBack) {
        let name = &cx.spec.target_ref.name;
        let msg = format!("Target Deployment {name} disappeared; removing the candidate.");
        cx.start_rollback(DecisionReason::TargetMissing, msg);
    }
    match (cx.status.phase, timing) {
        (Phase::Pending, Some(t)) => pending(cx, &t),
        (Phase::Selecting, Some(t)) => select::run(cx, &t),
        (Phase::Progressing | Phase::Paused, Some(t)) => progress::run(cx, &t),
        (Phase::Promoting, _) => finish::promote(cx),
        (Phase::RollingBack, _) => finish::roll_back(cx),
        _ => {}
    }
}

/// The target's pod template is not the one the experiment started with (image, env, a
/// container renamed or removed, a rollout restart…): the baseline being compared is gone,
/// and promoting would write the candidate config onto a template nobody judged — roll back.
/// In Promoting this holds until the promotion is seen written; after that the template
/// differs because of it. Held for an external promotion, the candidate config (and nothing
/// else) arriving is the completion, not a change (see `external`).
fn target_changed(cx: &mut Ctx) {
    let Some(target) = &cx.obs.target else {
        return;
    };
    let phase = cx.status.phase;
    let promoting = phase == Phase::Promoting && !target.runs_candidate_config;
    if !(matches!(phase, Phase::Selecting | Phase::Progressing | Phase::Paused) || promoting) {
        return;
    }
    let Some(original) = cx.status.original.as_mut() else {
        return;
    };
    let Some(recorded) = &original.template_hash else {
        // Started by an operator that did not record it: compared from now on.
        if phase != Phase::Promoting {
            original.template_hash = Some(target.template_hash.clone());
        }
        return;
    };
    let before = TemplateFingerprint::parse(recorded);
    let now = TemplateFingerprint::parse(&target.template_hash);
    if !before.differs(&now) || (external::holding(cx) && external::arrived(cx)) {
        return;
    }
    if external::arrived(cx) {
        let msg = external::early_message(cx);
        return cx.start_rollback(DecisionReason::TargetChanged, msg);
    }
    let Some(original) = cx.status.original.as_ref() else {
        return;
    };
    let msg = format!(
        "Deployment {}'s pod template was changed by someone else mid-flight ({} changed); \
         the candidate was judged against the old one. Restoring the target to {} replicas, \
         then removing the candidate.",
        cx.spec.target_ref.name,
        before.changes(&now).join(", "),
        original.replicas
    );
    cx.start_rollback(DecisionReason::TargetChanged, msg);
}

/// Someone else set the target's replicas to a count this experiment did not set (neither the
/// last it asked for, nor the one before, nor the original): take it as the person's intent for
/// the target's total size. It becomes `original.replicas`, so the split is recomputed from it
/// and a rollback or promotion restores it — rather than fighting it, or restoring a size the
/// person just changed.
fn follow_target_scale(cx: &mut Ctx) {
    let (Some(target), Some(scale)) = (&cx.obs.target, cx.status.target_scale) else {
        return;
    };
    let running = matches!(
        cx.status.phase,
        Phase::Selecting
            | Phase::Progressing
            | Phase::Paused
            | Phase::Promoting
            | Phase::RollingBack
    );
    let Some(original) = cx.status.original.as_mut().filter(|_| running) else {
        return;
    };
    let now = target.deployment.replicas;
    if [scale.from, scale.to, original.replicas].contains(&now) {
        return;
    }
    let before = std::mem::replace(&mut original.replicas, now);
    cx.status.target_scale = Some(TargetScale { from: now, to: now });
    if let Some(hpa) = &cx.obs.autoscaler {
        let msg = format!(
            "HorizontalPodAutoscaler {} scaled Deployment {} from {before} to {now} replicas: \
             the split follows it (the candidate's pods come on top of the target's).",
            hpa.name, cx.spec.target_ref.name
        );
        return cx.event(EventType::Normal, EventReason::TargetScaled, msg);
    }
    let msg = format!(
        "Deployment {} was scaled to {now} replicas by someone else (it had {before} before the \
         experiment): {now} is its size from now on — the split follows it, and a rollback or \
         promotion restores {now}.",
        cx.spec.target_ref.name
    );
    cx.event(EventType::Normal, EventReason::TargetScaled, msg);
}

/// How often the candidate's load is looked at while it alone carries an autoscaled target's
/// traffic: the HPA controller's own sync period.
pub const AUTOSCALE_PERIOD: Duration = Duration::from_secs(15);

/// At 100 % with the `replicas` router: the target is at 0 and the candidate carries the whole
/// load (the shell reads the candidate's pods' usage only then).
pub fn carries_the_whole_load(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
) -> bool {
    matches!(status.phase, Phase::Progressing | Phase::Paused)
        && !spec.traffic.router.uses_route()
        && status.stage_index.is_some_and(|i| {
            spec.stages
                .get(i.max(0) as usize)
                .is_none_or(|s| s.weight >= 100)
        })
}

/// At 100 % with the `replicas` router the target is at 0 replicas, where its HPA does not act,
/// and the candidate carries the whole load. So the HPA's rule is applied here, to the
/// candidate's pods (`Autoscaler::candidate_need`): a rise in load grows the candidate (at most
/// the HPA's `maxReplicas`; `original.autoscaledReplicas`, which the stage's split gives the
/// candidate: `readiness::split`), and each new pod, once ready,
/// raises `original.replicas` — the size the candidate keeps at 100 % and a promotion or
/// rollback restores. Not before: the router keeps `original.replicas` − the candidate's ready
/// pods on the target, so a size raised ahead would start baseline pods for capacity the
/// candidate never lost (and wake the HPA on a target above 0). Only rises: a fall waits for
/// the HPA, back in charge once the target is above 0 again — the experiment never takes
/// capacity away.
fn follow_load_at_full(cx: &mut Ctx) {
    let Some(hpa) = cx.obs.autoscaler.clone() else {
        return;
    };
    if !carries_the_whole_load(cx.spec, &cx.status) {
        return;
    }
    cx.wait(AUTOSCALE_PERIOD);
    let Some((size, ready)) = cx
        .obs
        .candidate
        .as_ref()
        .map(|c| (c.replicas, c.ready_replicas))
    else {
        return;
    };
    let Some(original) = cx.status.original.as_mut() else {
        return;
    };
    let asked = original.autoscaled_replicas.unwrap_or(0);
    original.replicas = original.replicas.max(ready.min(size).min(asked));
    let Some(need) = hpa.candidate_need.as_ref() else {
        return;
    };
    let to = need.replicas.min(hpa.max_replicas);
    let from = size.max(original.replicas).max(asked);
    if to <= from {
        return;
    }
    original.autoscaled_replicas = Some(to);
    let msg = format!(
        "At 100 % Deployment {} is at 0 replicas, where HorizontalPodAutoscaler {} does not act; \
         by its rule ({}) the candidate needs {} pods: scaling it from {from} to {to} (at most \
         maxReplicas {}); once they are ready, that is the size a promotion or rollback gives \
         the target.",
        cx.spec.target_ref.name, hpa.name, need.because, need.replicas, hpa.max_replicas
    );
    cx.event(EventType::Normal, EventReason::CandidateAutoscaled, msg);
}

/// Objects by the names this experiment writes exist and are not its own (`not_ours`): it
/// never adopts, overwrites or deletes them. Before it made anything that is `Invalid`; later
/// someone replaced one of its objects, and it rolls back around it (the shell only ever
/// deletes objects it observed as its own). True when the experiment stops here.
fn in_the_way(cx: &mut Ctx) -> bool {
    let found = &cx.obs.not_ours;
    if found.is_empty() {
        return false;
    }
    let what = match found.as_slice() {
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => return false,
    };
    let (exists, is, it) = if found.len() == 1 {
        ("exists", "is", "it")
    } else {
        ("exist", "are", "them")
    };
    match cx.status.phase {
        Phase::Pending => {
            let msg = format!(
                "{what} {exists} and {is} not managed by this experiment; rename or delete {it}"
            );
            invalid(cx, msg);
            true
        }
        Phase::Selecting | Phase::Progressing | Phase::Paused => {
            let msg = format!(
                "{what} {exists} but {is} not managed by this experiment (replaced by someone \
                 else); rolling back without touching {it}."
            );
            cx.start_rollback(DecisionReason::NotOwned, msg);
            false
        }
        _ => false,
    }
}

fn invalid(cx: &mut Ctx, msg: String) {
    cx.status.phase = Phase::Invalid;
    cx.status.message = Some(format!("The experiment cannot run: {msg}."));
    cx.reason = "Invalid".into();
    cx.event(
        EventType::Warning,
        EventReason::Invalid,
        cx.status.message.clone().unwrap_or_default(),
    );
}

fn pending(cx: &mut Ctx, t: &Timing) {
    if cx.obs.target.is_none() {
        let name = &cx.spec.target_ref.name;
        cx.status.message = Some(format!("Waiting for Deployment {name} to exist."));
        cx.reason = "TargetNotFound".into();
        cx.wait(timing::TARGET_POLL);
        return;
    }
    // Before anything is recorded or created: a series that never existed makes it Invalid.
    if !super::preflight::cleared(cx, t) {
        return;
    }
    let Some(target) = &cx.obs.target else {
        return;
    };
    // Recorded once: after a restart the target may already be scaled by this experiment.
    if cx.status.original.is_none() {
        cx.status.original = Some(OriginalState {
            replicas: target.deployment.replicas,
            route_backend_refs: None,
            template_hash: Some(target.template_hash.clone()),
            // Recorded by `external::remember`, like the route by `remember_route`.
            promoted_template_hash: None,
            autoscaled_replicas: None,
        });
    }
    cx.update_variants();
    if cx.spec.selects() {
        // One pod per variant must leave the candidates at most half of the traffic.
        let n = cx.spec.candidate_list().len() as i32;
        let weight = cx.spec.selection_or_default().weight;
        if let Err(e) = cx
            .spec
            .traffic
            .router
            .selection_split(cx.original(), weight, n, true)
        {
            return invalid(cx, format!("spec.candidates: {e}"));
        }
        return select::run(cx, t);
    }
    progress::start(cx, t);
}
