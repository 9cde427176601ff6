//! The entry point: `step` routes one reconcile's observations to the phase handlers, and the
//! context they share (the status being built, the actions, events and requeue time).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::observations::{Action, EventType, Observations, Step};
use super::validate::{validate, Timing};
use super::{analysis, approval, conditions, finish, progress, timing};
use crate::api::{
    ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, Decision, DecisionAction,
    OriginalState, Phase, RenderedServer, VariantStatus,
};

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
    cx.finish()
}

fn run(cx: &mut Ctx) {
    let phase = cx.status.phase;
    if cx.obs.deleting {
        return finish::delete(cx);
    }
    if phase.is_terminal() {
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
        });
    }
    cx.update_variants();
    cx.enter_stage(0);
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
        let n = self.spec.stages.len();
        let weight = self.spec.stages.get(index).map_or(100, |s| s.weight);
        self.status.stage_index = Some(index as i32);
        self.status.stage = Some(format!("{}/{n}", index + 1));
        self.status.planned_weight = weight;
        self.status.stage_started_at = None;
        self.status.stage_passed_analyses = 0;
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
            self.status.baseline = Some(VariantStatus {
                deployment: target_name.clone(),
                replicas: t.deployment.replicas,
                ready_replicas: t.deployment.ready_replicas,
                summary: t.baseline.summary(),
                config: t.baseline.clone(),
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
