//! Fixtures for the stage-machine tests: a spec from YAML, a small simulated cluster that obeys
//! the actions, and a driver that steps the machine through time.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    AnalysisRecord, CapacityMeasurement, CheckResult, ConcurrencyExperimentSpec,
    ConcurrencyExperimentStatus, RenderedServer, Router, ServerKind, VariantCapacity, Verdict,
};
use crate::plan::*;

/// A spec with the default 30/70/100 stages of 10m, a 1m interval and one latency check;
/// `extra` is appended YAML at the top level of the spec.
pub fn spec_with(extra: &str) -> ConcurrencyExperimentSpec {
    let yaml = format!(
        "targetRef: {{name: storefront}}\n\
         candidate: {{server: puma, workers: 2, threads: 4}}\n\
         analysis:\n  prometheus: {{url: 'http://prometheus:9090'}}\n  interval: 1m\n  \
         failureLimit: 1\n  inconclusiveLimit: 3\n  checks:\n  - {{metric: latency, max: 500ms}}\n\
         {extra}"
    );
    serde_yaml::from_str(&yaml).unwrap()
}

pub fn spec() -> ConcurrencyExperimentSpec {
    spec_with("")
}

pub fn t0() -> Timestamp {
    "2026-11-30T01:00:00Z".parse().unwrap()
}

pub fn at(secs: i64) -> Timestamp {
    t0() + jiff::SignedDuration::from_secs(secs)
}

pub fn record(verdict: Verdict, secs: i64, stage_index: i32, weight: i32) -> AnalysisRecord {
    AnalysisRecord {
        at: Time(at(secs)),
        stage_index,
        weight,
        verdict,
        baseline_requests: Some(600.0),
        candidate_requests: Some(300.0),
        checks: vec![CheckResult {
            name: "latency".into(),
            baseline: Some(0.41),
            candidate: Some(if verdict == Verdict::Fail { 0.62 } else { 0.4 }),
            limit: "max 500ms".into(),
            verdict,
            reason: None,
            evidence: None,
        }],
        reason: (verdict == Verdict::Inconclusive).then(|| "no data for the candidate".into()),
        capacity: Some(measured(30.0)),
    }
}

/// The demo app's measurement (2 ms CPU + 60 ms I/O per request) at `total_rate` req/s: a
/// candidate Puma 2×4 pod carries 129 req/s, far above what any stage gives it here.
pub fn measured(total_rate: f64) -> CapacityMeasurement {
    let times = VariantCapacity {
        cpu_per_request: Some(0.002),
        io_per_request: Some(0.060),
        per_pod_rate: Some(total_rate / 6.0),
        ..Default::default()
    };
    CapacityMeasurement {
        baseline: Some(times.clone()),
        candidate: Some(times),
        total_rate: Some(total_rate),
    }
}

/// Fingerprints of the target's pod template: as the experiment found it, and once the
/// promotion wrote the candidate config into it (env changed).
pub const TEMPLATE: &str = "t=00000000000000a1,c=000000c1,i=000000i1,e=000000e1";
pub const TEMPLATE_PROMOTED: &str = "t=00000000000000a2,c=000000c1,i=000000i1,e=000000e2";
/// `TargetState::promoted_hash` of both: the template with the candidate config rendered in.
pub const PROMOTED: &str = "t=00000000000000b1,c=000000c1,i=000000i1,e=000000e3";

/// A cluster that carries out the actions: spec changes at once, pods get ready on `settle`.
#[derive(Clone, Debug)]
pub struct World {
    pub router: Router,
    pub target: Option<TargetState>,
    pub candidate: Option<DeploymentState>,
    pub route_weight: i32,
    /// The experiment carries `concurrency.dev/approve: "true"`; `ClearApproval` removes it.
    pub approve_annotation: bool,
    /// `spec.approved`.
    pub spec_approved: bool,
    /// What the shell would say about not-ready candidate pods.
    pub candidate_problem: Option<String>,
    /// The candidate Deployment still has the template of an older `spec.candidate`;
    /// `EnsureCandidate` renders the current one.
    pub candidate_stale: bool,
    /// `metadata.generation` of the experiment.
    pub generation: i64,
    /// The experiment carries `concurrency.dev/retry: "true"`; `ClearRetry` removes it.
    pub retry_annotation: bool,
    /// The experiment carries `concurrency.dev/abort: "true"`; `ClearAbort` removes it.
    pub abort_annotation: bool,
    /// Another live experiment on the same target.
    pub other_experiment: Option<String>,
    /// What the shell would report in `Observations::spec_error`.
    pub spec_error: Option<String>,
    /// Objects in the way that the experiment did not create (`Observations::not_ours`).
    pub not_ours: Vec<String>,
    /// `Observations::candidate_cpu_limit`.
    pub candidate_cpu_limit: Option<f64>,
    /// An HPA on the target. On `settle` it does what a real one does to a Deployment whose
    /// pods it counts together with the candidate's: sizes a target above 0 for the whole
    /// `demand`, within its bounds — and so undoes any scale-down a split would make.
    pub autoscaler: Option<Autoscaler>,
    /// Pods the load needs, as an HPA computes it.
    pub demand: i32,
}

impl World {
    pub fn new(router: Router, replicas: i32) -> Self {
        let deployment = DeploymentState {
            replicas,
            ready_replicas: replicas,
            rolled_out: true,
        };
        let baseline = RenderedServer {
            server: ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..Default::default()
        };
        World {
            router,
            target: Some(TargetState {
                deployment,
                baseline: Some(baseline),
                runs_candidate_config: false,
                template_hash: TEMPLATE.into(),
                promoted_hash: Some(PROMOTED.into()),
                promotion_patch: None,
                deleting: false,
            }),
            candidate: None,
            route_weight: 0,
            approve_annotation: false,
            spec_approved: false,
            candidate_problem: None,
            candidate_stale: false,
            generation: 1,
            retry_annotation: false,
            abort_annotation: false,
            other_experiment: None,
            spec_error: None,
            not_ours: Vec::new(),
            candidate_cpu_limit: None,
            autoscaler: None,
            demand: replicas,
        }
    }

    /// What the HPAs do between two reconciles.
    pub fn autoscale(&mut self) {
        let Some(a) = &self.autoscaler else {
            return;
        };
        let want = self.demand.clamp(a.min_replicas, a.max_replicas);
        if let Some(t) = self.target.as_mut().filter(|t| t.deployment.replicas > 0) {
            t.deployment.replicas = want;
        }
    }

    pub fn apply(&mut self, actions: &[Action]) {
        for a in actions {
            match a {
                Action::EnsureCandidate { replicas } => {
                    let c = self.candidate.get_or_insert_with(Default::default);
                    c.replicas = *replicas;
                    // Scaling down takes pods out of service at once.
                    c.ready_replicas = c.ready_replicas.min(*replicas);
                    c.rolled_out = false;
                    self.candidate_stale = false;
                }
                Action::ScaleTarget { replicas } => {
                    if let Some(t) = &mut self.target {
                        t.deployment.replicas = *replicas;
                        t.deployment.ready_replicas = t.deployment.ready_replicas.min(*replicas);
                        t.deployment.rolled_out = false;
                    }
                }
                Action::SetRouteWeights {
                    candidate_weight, ..
                } => self.route_weight = *candidate_weight,
                Action::RestoreRoute => self.route_weight = 0,
                Action::PromoteTarget => {
                    if let Some(t) = &mut self.target {
                        t.runs_candidate_config = true;
                        t.template_hash = TEMPLATE_PROMOTED.into();
                        t.deployment.ready_replicas = 0;
                        t.deployment.rolled_out = false;
                    }
                }
                Action::RemoveCandidate => self.candidate = None,
                // No longer the experiment's: it stays, serving, outside the world observed.
                Action::KeepServing => self.candidate = None,
                Action::ClearApproval => self.approve_annotation = false,
                Action::ClearRetry => self.retry_annotation = false,
                Action::ClearAbort => self.abort_annotation = false,
                Action::Event { .. } | Action::Selection(_) => {}
            }
        }
    }

    /// The HPAs act, then all pods become ready and rollouts complete.
    pub fn settle(&mut self) {
        self.autoscale();
        if let Some(t) = &mut self.target {
            t.deployment.ready_replicas = t.deployment.replicas;
            t.deployment.rolled_out = true;
        }
        if let Some(c) = &mut self.candidate {
            c.ready_replicas = c.replicas;
            c.rolled_out = true;
        }
    }

    pub fn effective_weight(&self) -> i32 {
        let c = self.candidate.as_ref().map_or(0, |c| c.ready_replicas);
        let b = self
            .target
            .as_ref()
            .map_or(0, |t| t.deployment.ready_replicas);
        self.router.effective_weight(c, b, Some(self.route_weight))
    }

    pub fn observe(&self, now: Timestamp) -> Observations {
        Observations {
            now,
            generation: self.generation,
            deleting_since: None,
            namespace_terminating: false,
            abort_requested: self.abort_annotation,
            promotion_approved: self.spec_approved,
            resume_requested: self.approve_annotation,
            retry_requested: self.retry_annotation,
            other_experiment: self.other_experiment.clone(),
            spec_error: self.spec_error.clone(),
            target: self.target.clone(),
            candidate: self.candidate.clone(),
            candidate_runs_spec_config: self.candidate.is_some() && !self.candidate_stale,
            candidate_problem: self.candidate_problem.clone(),
            not_ours: self.not_ours.clone(),
            candidate_cpu_limit: self.candidate_cpu_limit,
            autoscaler: self.autoscaler.clone(),
            effective_weight: self.effective_weight(),
            route_backend_refs: None,
            analysis: None,
            selection: None,
            baselines: None,
            preflight: None,
            target_rate: None,
            queue_clock: None,
        }
    }
}

/// Steps the machine through time against a `World`, keeping every action it asked for.
#[derive(Clone)]
pub struct Run {
    pub spec: ConcurrencyExperimentSpec,
    pub status: ConcurrencyExperimentStatus,
    pub world: World,
    pub now: i64,
    pub log: Vec<Action>,
    pub last: Option<Step>,
    /// Pods get ready right after each step.
    pub auto_settle: bool,
    /// What the analyses `tick` makes measured for the capacity gate.
    pub measurement: Option<CapacityMeasurement>,
}

impl Run {
    pub fn new(spec: ConcurrencyExperimentSpec, replicas: i32) -> Self {
        let world = World::new(spec.traffic.router, replicas);
        Run {
            spec,
            status: Default::default(),
            world,
            now: 0,
            log: Vec::new(),
            last: None,
            auto_settle: true,
            measurement: Some(measured(30.0)),
        }
    }

    pub fn obs(&self) -> Observations {
        self.world.observe(at(self.now))
    }

    /// One reconcile with `edit` applied to the observations; runs the analysis the shell
    /// would run when `analysis_due` says so, with `verdict`.
    pub fn tick_with(
        &mut self,
        verdict: Option<Verdict>,
        edit: impl Fn(&mut Observations),
    ) -> &Step {
        let mut obs = self.obs();
        if let Some(v) = verdict {
            if analysis_due(&self.spec, &self.status, obs.now) {
                let stage = self.status.stage_index.unwrap_or(0);
                let record = AnalysisRecord {
                    capacity: self.measurement.clone(),
                    ..record(v, self.now, stage, obs.effective_weight)
                };
                obs.analysis = Some(AnalysisOutcome {
                    record,
                    recommendation: None,
                    no_data: false,
                    queries: Default::default(),
                });
            }
        }
        edit(&mut obs);
        let out = step(&self.spec, &self.status, &obs);
        // Every step of every test is also a replay test: the same observations on the new
        // status decide nothing new.
        let again = step(&self.spec, &out.status, &obs);
        assert!(
            events(&again.actions).is_empty(),
            "replay at {}: {:?}",
            self.now,
            again.actions
        );
        assert_eq!(
            again.status, out.status,
            "replay at {} changed the status",
            self.now
        );
        assert_eq!(again.release_finalizer, out.release_finalizer);
        self.world.apply(&out.actions);
        if self.auto_settle {
            self.world.settle();
        }
        self.log.extend(out.actions.iter().cloned());
        // What the API server stores is what the next (possibly restarted) process reads.
        let stored = serde_json::to_value(&out.status).unwrap();
        self.status = serde_json::from_value(stored).unwrap();
        assert_eq!(
            self.status, out.status,
            "status does not survive the API server"
        );
        self.last = Some(out);
        self.last.as_ref().unwrap()
    }

    /// The user edits `spec.candidate`: a new generation, and the candidate Deployment keeps
    /// its old template until the machine re-applies it.
    pub fn edit_candidate(&mut self, edit: impl Fn(&mut crate::api::ServerConfig)) {
        edit(
            self.spec
                .candidate
                .as_mut()
                .expect("a single-candidate spec"),
        );
        self.world.generation += 1;
        self.world.candidate_stale = self.world.candidate.is_some();
    }

    pub fn tick(&mut self, verdict: Option<Verdict>) -> &Step {
        self.tick_with(verdict, |_| {})
    }

    /// Ticks every `secs` seconds, `n` times, with analyses of `verdict`.
    pub fn advance(&mut self, secs: i64, n: usize, verdict: Verdict) {
        for _ in 0..n {
            self.now += secs;
            self.tick(Some(verdict));
        }
    }

    /// Event reasons asked for so far, in order.
    pub fn events(&self) -> Vec<String> {
        events(&self.log)
    }

    pub fn count(&self, f: impl Fn(&Action) -> bool) -> usize {
        self.log.iter().filter(|a| f(a)).count()
    }
}

pub fn events(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason, .. } => Some(reason.to_string()),
            _ => None,
        })
        .collect()
}

/// The type and message of the first Event with `reason` in `actions`; panics without one.
pub fn event_of(actions: &[Action], reason: &str) -> (EventType, String) {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Event {
                type_,
                reason: r,
                message,
            } if r == reason => Some((*type_, message.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {reason} event in {:?}", events(actions)))
}

/// The message of the first Event with `reason` in `actions`; panics without one.
pub fn message(actions: &[Action], reason: &str) -> String {
    event_of(actions, reason).1
}

pub fn condition(status: &ConcurrencyExperimentStatus, type_: &str) -> (String, String) {
    let c = conditions::get(status, type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.clone(), c.reason.clone())
}

pub fn secs(d: Option<Duration>) -> u64 {
    d.map(|d| d.as_secs()).unwrap_or(0)
}

/// A run whose stage 1 split is in force at t = 10 s (6 replicas, 2 + 4).
pub fn in_stage_one() -> Run {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    for _ in 0..2 {
        run.now += 5;
        run.tick(None);
    }
    assert_eq!(run.status.stage_started_at, Some(Time(at(10))));
    run.log.clear();
    run
}
