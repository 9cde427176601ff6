//! The context every handler of one step shares — the status being built, the actions,
//! events and requeue time — and the primitives they build a step from (entering a stage,
//! deciding to promote or roll back, holding). It depends on no handler: the handlers
//! (`progress`, `finish`, `approval`, `analysis`, `capacity`, `retry`) use it, and `machine`
//! routes a step to them.

use crate::api::reason::EventReason;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions;
use super::observations::{Action, EventType, Observations, Step};
use super::timing;
use crate::api::reason::{DecisionReason, HoldReason};
use crate::api::{
    ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, Decision, DecisionAction, Phase,
    RenderedServer, TargetScale, VariantStatus,
};
use crate::traffic::{ReplicaSplit, Sizing};

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
    /// A removal waits for `spec.traffic.scaleDownDelay`: look again then, even in a terminal
    /// phase (a selection's leftover variants can outlive the decision).
    pub removal_held: bool,
    initial_phase: Phase,
    /// The status as stored, for a step that leaves it so.
    stored: &'a ConcurrencyExperimentStatus,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(
        spec: &'a ConcurrencyExperimentSpec,
        status: &'a ConcurrencyExperimentStatus,
        obs: &'a Observations,
    ) -> Self {
        let initial_phase = status.phase;
        let stored = status;
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
            removal_held: false,
            initial_phase,
            stored,
        }
    }

    pub(super) fn finish(mut self) -> Step {
        // Released in a terminating namespace: nothing to record (the deletion bumped the
        // generation, and a status write per experiment only slowed the namespace's end).
        if self.release && self.obs.namespace_terminating {
            return Step {
                actions: self.actions,
                status: self.stored.clone(),
                requeue_after: None,
                release_finalizer: true,
            };
        }
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
            requeue_after: if phase.is_terminal() && !self.removal_held {
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

    pub fn event(&mut self, type_: EventType, reason: EventReason, message: String) {
        self.actions.push(Action::Event {
            type_,
            reason,
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

    /// Ready pods of everything this experiment runs beside the target: the candidate, a
    /// selection's candidates and its fresh baseline. Zero means no traffic depends on them.
    pub fn ready_beside_target(&self) -> i32 {
        let candidate = self.obs.candidate.as_ref().map_or(0, |c| c.ready_replicas);
        let selection = self.obs.selection.as_ref().map_or(0, |s| {
            s.candidates
                .iter()
                .chain(std::iter::once(&s.fresh_baseline))
                .filter_map(|v| v.deployment.as_ref())
                .map(|d| d.ready_replicas)
                .sum()
        });
        candidate + selection
    }

    /// Who sizes the target: an HPA on it, or this experiment.
    pub fn sizing(&self) -> Sizing {
        match &self.obs.autoscaler {
            Some(a) => Sizing::Autoscaled {
                max: a.max_replicas,
            },
            None => Sizing::Fixed,
        }
    }

    /// The pods a stage of `weight` percent gives each variant, and the share that makes.
    pub fn split(&self, weight: i32) -> ReplicaSplit {
        super::split::stage_split(self.spec, self.original(), weight, self.sizing())
    }

    /// The candidate the stages walk: `spec.candidate`, or the selection's winner once chosen.
    pub fn candidate(&self) -> &'a crate::api::ServerConfig {
        let spec = self.spec;
        spec.walked_candidate(Some(&self.status))
    }

    /// The highest share any variant of this experiment gets now — the candidate's, the fresh
    /// baseline's, a selection candidate's: nonzero while the route is still split by it.
    pub fn route_traffic(&self) -> i32 {
        let variants = self.obs.selection.iter().flat_map(|s| {
            s.candidates
                .iter()
                .chain([&s.fresh_baseline])
                .map(|v| v.share)
        });
        variants.fold(self.obs.effective_weight, i32::max)
    }

    /// `status.selection`, made empty if missing.
    pub fn selection(&mut self) -> &mut crate::api::SelectionStatus {
        self.status.selection.get_or_insert_with(Default::default)
    }

    /// Starts stage `index`: its clock starts once the split is in force.
    pub fn enter_stage(&mut self, index: usize) {
        self.set_stage(index);
        let (n, weight) = (self.spec.stages.len(), self.status.planned_weight);
        let (reason, verb) = if index == 0 {
            (EventReason::Started, "Starting")
        } else {
            (EventReason::StageAdvanced, "Advancing to")
        };
        let candidate = self.candidate().summary();
        let msg = format!(
            "{verb} stage {}/{n}: {weight}% of traffic to the candidate ({candidate}).",
            index + 1
        );
        self.event(EventType::Normal, reason, msg);
    }

    /// The planned weight of stage `index`; past the spec's last stage (stages removed
    /// mid-flight) the experiment is at 100 %.
    pub fn stage_weight(&self, index: usize) -> i32 {
        self.spec.stages.get(index).map_or(100, |s| s.weight)
    }

    /// Stage `index` without an Event (a restart says why itself).
    pub fn set_stage(&mut self, index: usize) {
        let n = self.spec.stages.len();
        let weight = self.stage_weight(index);
        self.status.stage_index = Some(index as i32);
        self.status.stage = Some(format!("{}/{n}", index + 1));
        self.status.planned_weight = weight;
        self.status.stage_entered_at = Some(Time(self.now()));
        self.status.stage_started_at = None;
        self.status.stage_passed_analyses = 0;
    }

    /// What the experiment holds for (`status.holdReason`); a stored reason this version does
    /// not know reads as none.
    pub fn hold(&self) -> Option<HoldReason> {
        self.status
            .hold_reason
            .as_deref()
            .and_then(HoldReason::parse)
    }

    pub fn set_hold(&mut self, hold: Option<HoldReason>) {
        self.status.hold_reason = hold.map(|h| h.to_string());
    }

    /// Forgets what was measured and decided about the candidate: counters, history, the
    /// baseline reference, the last verdict and holds. The time of the last analysis stays,
    /// so an analysis already seen is not counted again.
    pub fn forget_measurements(&mut self) {
        let st = &mut self.status;
        st.analyses.clear();
        st.baseline_reference.clear();
        st.improvement = None;
        st.last_verdict = None;
        st.failed_analyses = 0;
        st.inconclusive_analyses = 0;
        st.stage_passed_analyses = 0;
        st.no_data_analyses = 0;
        st.hold_reason = None;
        st.promotion_patch = None;
        st.capacity_gate = None;
        st.conditions.retain(|c| c.type_ != conditions::NO_DATA);
    }

    /// Decides to roll back (once): the rollback handler then restores the baseline.
    pub fn start_rollback(&mut self, reason: DecisionReason, message: String) {
        if matches!(self.status.phase, Phase::RollingBack) || self.status.phase.is_terminal() {
            return;
        }
        self.status.phase = Phase::RollingBack;
        self.set_hold(None);
        self.status.promoting = None;
        // Not promoted: nothing is left to commit.
        self.status.promotion_patch = None;
        self.status.message = Some(message.clone());
        self.status.decision = Some(Decision {
            action: DecisionAction::Rollback,
            reason: reason.to_string(),
            message: message.clone(),
            at: Time(self.now()),
        });
        self.event(EventType::Warning, EventReason::Decision(reason), message);
    }

    /// Decides to promote (once): the promotion handler then writes the candidate config.
    pub fn start_promotion(&mut self, reason: DecisionReason, message: String) {
        self.status.phase = Phase::Promoting;
        self.set_hold(None);
        // What was judged is what lands, even if spec.candidate is edited from now on.
        self.status.promoting = Some(self.candidate().clone());
        self.status.message = Some(message.clone());
        self.status.decision = Some(Decision {
            action: DecisionAction::Promote,
            reason: reason.to_string(),
            message: message.clone(),
            at: Time(self.now()),
        });
        self.event(EventType::Normal, EventReason::Promoting, message);
    }

    /// The config being promoted: `status.promoting` once decided, else the walked candidate.
    pub fn promoted_candidate(&self) -> &crate::api::ServerConfig {
        match self.status.promoting.as_ref() {
            Some(judged) => judged,
            None => self.candidate(),
        }
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
        // The fresh baseline while it runs: the target's config, on its own pods.
        let fresh = self.obs.selection.as_ref();
        let fresh = fresh.and_then(|s| s.fresh_baseline.deployment.clone());
        let shown = fresh.map(|d| {
            let name = crate::workload::fresh_baseline_name(target_name);
            let config = self.status.baseline.as_ref().map(|b| b.config.clone());
            let config = config.unwrap_or_default();
            VariantStatus {
                pods: pods(&name),
                deployment: name,
                replicas: d.replicas,
                ready_replicas: d.ready_replicas,
                summary: config.summary(),
                config,
            }
        });
        if shown.is_some() || self.status.fresh_baseline.is_some() {
            self.status
                .fresh_baseline
                .get_or_insert_with(Default::default)
                .variant = shown;
        }
        let config = RenderedServer::from(self.promoted_candidate());
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
}
