//! The selection's fixtures: a spec with three candidates, and `Sel` — a `Run` plus the
//! variants' Deployments and route weights, obeying the selection actions and checking at
//! every step that the target keeps its capacity.

use super::*;

/// Three candidates, 10 % each, a 20m selection; failureLimit 1 (two failures eliminate).
pub fn selection_spec(extra: &str) -> ConcurrencyExperimentSpec {
    let mut spec = spec_with(&format!(
        "selection: {{weight: 10, duration: 20m{extra}}}\n\
         candidates: [{{server: puma, workers: 1, threads: 1}}, {{server: puma, workers: 2, threads: 4}}, \
         {{server: puma, workers: 2, threads: 3}}]\n"
    ));
    spec.candidate = None;
    spec
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// A `Run` plus the selection's variants: Deployments that obey the selection actions.
pub struct Sel {
    pub run: Run,
    pub variants: Vec<Option<DeploymentState>>,
    pub fresh: Option<DeploymentState>,
    /// gatewayAPI route weights per candidate and for the fresh baseline.
    pub weights: Vec<i32>,
    pub fresh_weight: i32,
    pub original: i32,
    /// `spec.abort`.
    pub abort: bool,
}

impl Sel {
    pub fn new(spec: ConcurrencyExperimentSpec, replicas: i32) -> Self {
        let n = spec.candidate_list().len();
        Sel {
            run: Run::new(spec, replicas),
            variants: vec![None; n],
            fresh: None,
            weights: vec![0; n],
            fresh_weight: 0,
            original: replicas,
            abort: false,
        }
    }

    pub fn observe(&self, analysis: Option<SelectionAnalysis>) -> SelectionObservations {
        let ready = |d: &Option<DeploymentState>| d.as_ref().map_or(0, |d| d.ready_replicas);
        let target = self
            .run
            .world
            .target
            .as_ref()
            .map_or(0, |t| t.deployment.ready_replicas);
        let total = target + ready(&self.fresh) + self.variants.iter().map(ready).sum::<i32>();
        let share = |d: &Option<DeploymentState>, w: i32| match self.run.spec.traffic.router {
            Router::Replicas => crate::traffic::percent(ready(d), total),
            Router::GatewayApi => w,
        };
        let obs = |d: &Option<DeploymentState>, w: i32| VariantObservation {
            deployment: d.clone(),
            runs_spec_config: d.is_some(),
            share: share(d, w),
        };
        SelectionObservations {
            candidates: (0..self.variants.len())
                .map(|i| obs(&self.variants[i], self.weights[i]))
                .collect(),
            fresh_baseline: obs(&self.fresh, self.fresh_weight),
            analysis,
        }
    }

    /// One reconcile, with the interval's analysis if given.
    pub fn tick(&mut self, analysis: Option<SelectionAnalysis>) -> Step {
        self.tick_verdict(analysis, None)
    }

    /// One reconcile; in the stages, a due analysis of `verdict`.
    pub fn tick_verdict(
        &mut self,
        analysis: Option<SelectionAnalysis>,
        verdict: Option<Verdict>,
    ) -> Step {
        let sel = self.observe(analysis);
        let abort = self.abort;
        let step = self
            .run
            .tick_with(verdict, |o| {
                o.selection = Some(sel.clone());
                o.abort_requested = abort;
            })
            .clone();
        for a in &step.actions {
            if *a == Action::RestoreRoute {
                // The route's original refs name none of the variants.
                self.weights.iter_mut().for_each(|w| *w = 0);
                self.fresh_weight = 0;
            }
            if let Action::SetRouteWeights { fresh_baseline, .. } = a {
                // A stage's split replaces every variant ref: the candidates' go.
                self.weights.iter_mut().for_each(|w| *w = 0);
                self.fresh_weight = *fresh_baseline;
            }
            let Action::Selection(a) = a else { continue };
            let ready = |n: i32| DeploymentState {
                replicas: n,
                ready_replicas: n,
                rolled_out: true,
            };
            match a {
                SelectionAction::EnsureVariant { index, replicas } => {
                    self.variants[*index] = Some(ready(*replicas))
                }
                SelectionAction::EnsureFreshBaseline { replicas } => {
                    self.fresh = Some(ready(*replicas))
                }
                SelectionAction::SetWeights {
                    candidates,
                    fresh_baseline,
                } => {
                    self.weights = vec![0; self.variants.len()];
                    for (i, w) in candidates {
                        self.weights[*i] = *w;
                    }
                    self.fresh_weight = *fresh_baseline;
                }
                SelectionAction::RemoveFreshBaseline => {
                    assert_eq!(self.fresh_weight, 0, "pods removed under live route weight");
                    self.fresh = None
                }
                SelectionAction::RemoveVariant { index } => {
                    assert_eq!(
                        self.weights[*index], 0,
                        "pods removed under live route weight"
                    );
                    self.variants[*index] = None
                }
            }
        }
        // Capacity never below the baseline's: the target keeps every pod while variants
        // come and go.
        let t = &self.run.world.target.as_ref().unwrap().deployment;
        if self.run.status.phase == crate::api::Phase::Selecting {
            assert!(
                t.replicas >= self.original && t.ready_replicas >= self.original,
                "{t:?}"
            );
        }
        let c = self
            .run
            .world
            .candidate
            .as_ref()
            .map_or(0, |c| c.ready_replicas);
        assert!(t.ready_replicas + c >= self.original, "{t:?}");
        step
    }

    /// An interval `secs` later with these verdicts and memory per candidate (MiB).
    pub fn interval(&mut self, secs: i64, per: &[(Verdict, f64)]) -> Step {
        self.interval_with(secs, per, |_| {})
    }

    /// `interval`, each candidate's record changed by `edit` (e.g. its request count).
    pub fn interval_with(
        &mut self,
        secs: i64,
        per: &[(Verdict, f64)],
        edit: impl Fn(&mut AnalysisRecord),
    ) -> Step {
        self.run.now += secs;
        let at = at(self.run.now);
        let candidates = per
            .iter()
            .enumerate()
            .filter(|(i, _)| self.variants[*i].is_some())
            .map(|(i, (v, mem))| CandidateAnalysis {
                index: i,
                outcome: AnalysisOutcome {
                    record: {
                        let mut r = record(*v, self.run.now, 0, 10);
                        edit(&mut r);
                        r
                    },
                    recommendation: None,
                    no_data: false,
                    queries: Default::default(),
                },
                objective: Some(mem * MIB),
            })
            .collect();
        self.tick(Some(SelectionAnalysis {
            at,
            fresh_baseline_objective: Some(200.0 * MIB),
            candidates,
        }))
    }

    pub fn selection(&self) -> &crate::api::SelectionStatus {
        self.run.status.selection.as_ref().unwrap()
    }
}

pub fn reasons(step: &Step) -> Vec<String> {
    events(&step.actions)
}
