//! The entry point: `step` routes one reconcile's observations to the phase handlers, and the
//! context they share (the status being built, the actions, events and requeue time).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::observations::{Action, EventType, Observations, Step};
use super::validate::{validate, Timing};
use super::{analysis, approval, capacity, conditions, finish, progress, retry, timing};
use crate::api::{
    ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, Decision, DecisionAction,
    OriginalState, Phase, RenderedServer, TargetScale, VariantStatus,
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
    approval::settle(&mut cx);
    retry::settle(&mut cx);
    remember_route(&mut cx);
    cx.finish()
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
    if cx.obs.deleting {
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
                Phase::Progressing | Phase::Paused => {
                    cx.start_rollback("InvalidSpec", format!("The spec became invalid: {msg}."))
                }
                // Promotion and rollback need no durations; finish them.
                _ => {}
            }
            None
        }
    };
    if cx.obs.abort_requested
        && matches!(
            cx.status.phase,
            Phase::Pending | Phase::Progressing | Phase::Paused
        )
    {
        cx.start_rollback(
            "Aborted",
            "Aborted on request; restoring the baseline.".into(),
        );
    }
    if cx.obs.target.is_none() && !matches!(cx.status.phase, Phase::Pending | Phase::RollingBack) {
        let name = &cx.spec.target_ref.name;
        let msg = format!("Target Deployment {name} disappeared; removing the candidate.");
        cx.start_rollback("TargetMissing", msg);
    }
    match (cx.status.phase, timing) {
        (Phase::Pending, Some(t)) => pending(cx, &t),
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
/// differs because of it.
fn target_changed(cx: &mut Ctx) {
    let Some(target) = &cx.obs.target else {
        return;
    };
    let phase = cx.status.phase;
    let promoting = phase == Phase::Promoting && !target.runs_candidate_config;
    if !(matches!(phase, Phase::Progressing | Phase::Paused) || promoting) {
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
    if !before.differs(&now) {
        return;
    }
    let msg = format!(
        "Deployment {}'s pod template was changed by someone else mid-flight ({} changed); \
         the candidate was judged against the old one. Restoring the target to {} replicas, \
         then removing the candidate.",
        cx.spec.target_ref.name,
        before.changes(&now).join(", "),
        original.replicas
    );
    cx.start_rollback("TargetChanged", msg);
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
        Phase::Progressing | Phase::Paused | Phase::Promoting | Phase::RollingBack
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
    let msg = format!(
        "Deployment {} was scaled to {now} replicas by someone else (it had {before} before the \
         experiment): {now} is its size from now on — the split follows it, and a rollback or \
         promotion restores {now}.",
        cx.spec.target_ref.name
    );
    cx.event(EventType::Normal, "TargetScaled", msg);
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
        Phase::Progressing | Phase::Paused => {
            let msg = format!(
                "{what} {exists} but {is} not managed by this experiment (replaced by someone \
                 else); rolling back without touching {it}."
            );
            cx.start_rollback("NotOwned", msg);
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
        "Invalid",
        cx.status.message.clone().unwrap_or_default(),
    );
}

fn pending(cx: &mut Ctx, t: &Timing) {
    let Some(target) = &cx.obs.target else {
        let name = &cx.spec.target_ref.name;
        cx.status.message = Some(format!("Waiting for Deployment {name} to exist."));
        cx.reason = "TargetNotFound".into();
        cx.wait(timing::TARGET_POLL);
        return;
    };
    // Recorded once: after a restart the target may already be scaled by this experiment.
    if cx.status.original.is_none() {
        cx.status.original = Some(OriginalState {
            replicas: target.deployment.replicas,
            route_backend_refs: None,
            template_hash: Some(target.template_hash.clone()),
        });
    }
    cx.update_variants();
    cx.enter_stage(0);
    // Told once, at the start: what the router can really give, and a gate that is off.
    if let Some(msg) = capacity::coarse_split(cx.spec, cx.original()) {
        cx.event(EventType::Normal, "CoarseSplit", msg);
    }
    if let Some(why) = capacity::off_reason(cx.spec, t).filter(|_| cx.spec.stages.len() > 1) {
        let msg = format!(
            "The capacity gate is off ({why}): each step is taken on the checks alone, without \
             predicting whether the candidate can carry it."
        );
        cx.event(EventType::Normal, capacity::CAPACITY_GATE_OFF, msg);
    }
    progress::run(cx, t);
}

/// What the handlers share while building one `Step`.
pub(crate) struct Ctx<'a> {
    pub spec: &'a ConcurrencyExperimentSpec,
    pub obs: &'a Observations,
    pub status: ConcurrencyExperimentStatus,
    pub actions: Vec<Action>,
    pub requeue: Option<Duration>,
    pub release: bool,
    /// The CamelCase why of the current state, for conditions; defaults to the phase.
    pub reason: String,
    /// The spec changed since the last step (re-apply the candidate).
    pub spec_changed: bool,
    initial_phase: Phase,
}

impl<'a> Ctx<'a> {
    fn new(
        spec: &'a ConcurrencyExperimentSpec,
        status: &ConcurrencyExperimentStatus,
        obs: &'a Observations,
    ) -> Self {
        let initial_phase = status.phase;
        let mut status = status.clone();
        let spec_changed = status
            .observed_generation
            .is_some_and(|g| g != obs.generation);
        status.observed_generation = Some(obs.generation);
        Ctx {
            spec,
            obs,
            status,
            actions: Vec::new(),
            requeue: None,
            release: false,
            reason: String::new(),
            spec_changed,
            initial_phase,
        }
    }

    fn finish(mut self) -> Step {
        self.record_target_scale();
        let phase = self.status.phase;
        // A terminal status is left alone once written; replays must not touch it.
        if !phase.is_terminal() || phase != self.initial_phase {
            let reason = if self.reason.is_empty() {
                match (&self.status.decision, phase) {
                    (Some(d), Phase::RollingBack | Phase::RolledBack) => d.reason.clone(),
                    _ => phase.as_str().to_string(),
                }
            } else {
                self.reason.clone()
            };
            conditions::sync(&mut self.status, &reason, self.obs.generation, self.obs.now);
        }
        Step {
            actions: self.actions,
            status: self.status,
            requeue_after: if phase.is_terminal() {
                None
            } else {
                self.requeue
            },
            release_finalizer: self.release,
        }
    }

    /// Keeps only the last `ScaleTarget` of the step — the size the step leaves the target at
    /// (an earlier one that ran alone would be a count never recorded, and look like someone
    /// else's) — and records it in `status.targetScale`, with the count it replaces.
    fn record_target_scale(&mut self) {
        let Some(target) = &self.obs.target else {
            return;
        };
        let is_scale = |a: &Action| matches!(a, Action::ScaleTarget { .. });
        let mut earlier = self
            .actions
            .iter()
            .filter(|a| is_scale(a))
            .count()
            .saturating_sub(1);
        self.actions.retain(|a| {
            let drop = earlier > 0 && is_scale(a);
            earlier -= usize::from(drop);
            !drop
        });
        let asked = self.actions.iter().find_map(|a| match a {
            Action::ScaleTarget { replicas } => Some(*replicas),
            _ => None,
        });
        let from = target.deployment.replicas;
        let phase = self.status.phase;
        let running = phase != Phase::Pending && !phase.is_terminal();
        match asked {
            Some(to) => self.status.target_scale = Some(TargetScale { from, to }),
            // From the first step on (and for experiments started before this was recorded),
            // so that a person's scaling is told apart even when the experiment never scales.
            None if running && self.status.target_scale.is_none() => {
                self.status.target_scale = Some(TargetScale { from, to: from })
            }
            None => {}
        }
    }

    pub fn now(&self) -> Timestamp {
        self.obs.now
    }

    pub fn event(&mut self, type_: EventType, reason: &str, message: String) {
        self.actions.push(Action::Event {
            type_,
            reason: reason.to_string(),
            message,
        });
    }

    pub fn wait(&mut self, d: Duration) {
        self.requeue = timing::sooner(self.requeue, d);
    }

    /// The target's replicas before the experiment (its current count if never recorded).
    pub fn original(&self) -> i32 {
        match (&self.status.original, &self.obs.target) {
            (Some(o), _) => o.replicas,
            (None, Some(t)) => t.deployment.replicas,
            (None, None) => 0,
        }
    }

    /// Starts stage `index`: its clock starts once the split is in force.
    pub fn enter_stage(&mut self, index: usize) {
        self.set_stage(index);
        let (n, weight) = (self.spec.stages.len(), self.status.planned_weight);
        let (reason, verb) = if index == 0 {
            ("Started", "Starting")
        } else {
            ("StageAdvanced", "Advancing to")
        };
        let candidate = self.spec.candidate.summary();
        let msg = format!(
            "{verb} stage {}/{n}: {weight}% of traffic to the candidate ({candidate}).",
            index + 1
        );
        self.event(EventType::Normal, reason, msg);
    }

    /// Stage `index` without an Event (a restart says why itself).
    pub fn set_stage(&mut self, index: usize) {
        let n = self.spec.stages.len();
        let weight = self.spec.stages.get(index).map_or(100, |s| s.weight);
        self.status.stage_index = Some(index as i32);
        self.status.stage = Some(format!("{}/{n}", index + 1));
        self.status.planned_weight = weight;
        self.status.stage_entered_at = Some(Time(self.now()));
        self.status.stage_started_at = None;
        self.status.stage_passed_analyses = 0;
    }

    /// Forgets what was measured and decided about the candidate: counters, history, the
    /// baseline reference, the last verdict and holds. The time of the last analysis stays,
    /// so an analysis already seen is not counted again.
    pub fn forget_measurements(&mut self) {
        let st = &mut self.status;
        st.analyses.clear();
        st.baseline_reference.clear();
        st.last_verdict = None;
        st.failed_analyses = 0;
        st.inconclusive_analyses = 0;
        st.stage_passed_analyses = 0;
        st.no_data_analyses = 0;
        st.hold_reason = None;
        st.capacity_gate = None;
        st.conditions.retain(|c| c.type_ != conditions::NO_DATA);
    }

    /// Decides to roll back (once): the rollback handler then restores the baseline.
    pub fn start_rollback(&mut self, reason: &str, message: String) {
        if matches!(self.status.phase, Phase::RollingBack) || self.status.phase.is_terminal() {
            return;
        }
        self.status.phase = Phase::RollingBack;
        self.status.hold_reason = None;
        self.status.message = Some(message.clone());
        self.status.decision = Some(Decision {
            action: DecisionAction::Rollback,
            reason: reason.to_string(),
            message: message.clone(),
            at: Time(self.now()),
        });
        self.event(EventType::Warning, reason, message);
    }

    /// Decides to promote (once): the promotion handler then writes the candidate config.
    pub fn start_promotion(&mut self, reason: &str, message: String) {
        self.status.phase = Phase::Promoting;
        self.status.hold_reason = None;
        self.status.message = Some(message.clone());
        self.status.decision = Some(Decision {
            action: DecisionAction::Promote,
            reason: reason.to_string(),
            message: message.clone(),
            at: Time(self.now()),
        });
        self.event(EventType::Normal, "Promoting", message);
    }

    /// Refreshes the per-variant replica counts and configs from the observations.
    pub fn update_variants(&mut self) {
        self.status.effective_weight = self.obs.effective_weight;
        let target_name = &self.spec.target_ref.name;
        // The regex `{{pods}}` gets for each variant, so a person can paste it into PromQL.
        let pods = |deployment: &str| Some(crate::analysis::pods_regex(deployment));
        if let Some(t) = &self.obs.target {
            let previous = self.status.baseline.take();
            // With its app container gone, the config last read from the target is the best
            // account of what the baseline ran.
            let config = t
                .baseline
                .clone()
                .or_else(|| previous.map(|b| b.config))
                .unwrap_or_default();
            self.status.baseline = Some(VariantStatus {
                deployment: target_name.clone(),
                replicas: t.deployment.replicas,
                ready_replicas: t.deployment.ready_replicas,
                summary: config.summary(),
                config,
                pods: pods(target_name),
            });
        }
        let config = RenderedServer::from(&self.spec.candidate);
        let c = self.obs.candidate.clone().unwrap_or_default();
        let candidate = crate::workload::candidate_name(target_name);
        self.status.candidate = Some(VariantStatus {
            pods: pods(&candidate),
            deployment: candidate,
            replicas: c.replicas,
            ready_replicas: c.ready_replicas,
            summary: config.summary(),
            config,
        });
    }

    /// Records one analysis; returns true when it decided to roll back.
    pub fn record_analysis(&mut self, stage_index: usize) -> bool {
        analysis::record(self, stage_index)
    }
}
