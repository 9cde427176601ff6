//! What the shell tells the stage machine, and what the stage machine asks the shell to do.

use crate::api::reason::EventReason;
use std::time::Duration;

use jiff::Timestamp;

use crate::analysis::queue_header::CoarseClock;
pub use crate::analysis::{AnalysisOutcome, CandidateAnalysis, Preflight, SelectionAnalysis};
use crate::api::{BaselinesMeasured, ConcurrencyExperimentStatus, PromotionPatch, RenderedServer};
pub use crate::workload::DeploymentState;

/// Everything the shell observed in one reconcile.
#[derive(Clone, Debug, PartialEq)]
pub struct Observations {
    pub now: Timestamp,
    /// `metadata.generation` of the experiment.
    pub generation: i64,
    /// The experiment's deletion timestamp: restore the baseline, then let it go. A baseline
    /// that cannot be restored holds the deletion for `spec.progressDeadline` from it, not for
    /// ever (`finish::delete`).
    pub deleting_since: Option<Timestamp>,
    /// The experiment's namespace is being deleted (asked only while the experiment is): the
    /// namespace controller deletes the target and the route with it, nothing is restored.
    pub namespace_terminating: bool,
    /// `spec.abort` or the `concurrency.dev/abort` annotation.
    pub abort_requested: bool,
    /// `spec.approved`: declarative approval of a `manual` promotion only.
    pub promotion_approved: bool,
    /// The `concurrency.dev/approve` annotation is `"true"`: a one-shot approval of the next
    /// hold (inconclusive hold or manual promotion), removed once acted on (see `approval`).
    pub resume_requested: bool,
    /// The `concurrency.dev/retry` annotation is `"true"`: a one-shot request to run a
    /// `RolledBack` experiment again from stage 1, removed once acted on (see `retry`).
    pub retry_requested: bool,
    /// Another live (not finished, not being deleted) experiment on the same target, of any
    /// age. A retry waits for it: the retried experiment would otherwise stop it as its rival.
    pub other_experiment: Option<String>,
    /// A problem with the spec the schema could not catch (e.g. the named container does not
    /// exist, another experiment already owns the target). Leads to `Invalid`.
    pub spec_error: Option<String>,
    /// The target Deployment; `None` when it does not exist.
    pub target: Option<TargetState>,
    /// The candidate Deployment; `None` when it does not exist (yet, or any more), or is not
    /// this experiment's (then it is in `not_ours`).
    pub candidate: Option<DeploymentState>,
    /// The candidate Deployment's template carries `spec.candidate` (false when it does not
    /// exist): until it does, the candidate is re-applied and its split is not in force.
    pub candidate_runs_spec_config: bool,
    /// Why the candidate's pods are not ready (e.g. `pod storefront-candidate-…: container web
    /// waiting: CrashLoopBackOff`), when it exists with fewer ready than wanted replicas and
    /// its pods say. Only for messages: a missed progress deadline names it.
    pub candidate_problem: Option<String>,
    /// Objects by the names this experiment writes that it did not create (no owner reference
    /// to it), e.g. `Deployment storefront-candidate`. They are never written or deleted: a
    /// Pending experiment is `Invalid`, a running one rolls back around them (`NotOwned`).
    pub not_ours: Vec<String>,
    /// The CPU limit of the candidate's app container, cores (`spec.candidate.resources`, else
    /// the target's): it caps the candidate's capacity in the capacity gate.
    pub candidate_cpu_limit: Option<f64>,
    /// The HorizontalPodAutoscaler that scales the target, if any: it sizes the target, and the
    /// split works around it (`traffic::Sizing::Autoscaled`) instead of fighting it.
    pub autoscaler: Option<Autoscaler>,
    /// The split currently applied by the router, percent of traffic to the candidate.
    /// For `replicas` this is derived from ready pods; for `gatewayAPI` it is the route weight.
    pub effective_weight: i32,
    /// The route's backendRefs (`traffic::route_backend_refs`, as JSON) while the route is
    /// still the user's — not split by this experiment; `None` once split, and for a router
    /// without a route. The machine records them once in `status.original.routeBackendRefs`,
    /// as it records `original.replicas`, so a rollback or deletion can put them back.
    pub route_backend_refs: Option<String>,
    /// Set when the shell ran an analysis in this reconcile (because `analysis_due` said so).
    pub analysis: Option<AnalysisOutcome>,
    /// The selection's variants and analyses (docs/selection.md); `None` outside a selection.
    pub selection: Option<SelectionObservations>,
    /// Set with an analysis against a fresh baseline: each check on the long-running target
    /// and on the fresh baseline (`status.freshBaseline.measured`).
    pub baselines: Option<BaselinesMeasured>,
    /// The pre-flight series lookup, when the shell made it in this reconcile (`preflight_due`).
    /// `None` while Pending means it was not made (the operator runs with `--preflight=false`):
    /// the experiment starts without it.
    pub preflight: Option<Preflight>,
    /// The target's request rate (requests/s over all its pods), measured with a pre-flight
    /// lookup that found nothing missing; `None` without one or without an answer.
    pub target_rate: Option<f64>,
    /// The target's queue times look like a one-second clock (measured with a pre-flight
    /// lookup that found nothing missing, for a spec that judges `queueTime`).
    pub queue_clock: Option<CoarseClock>,
}

impl Observations {
    /// The experiment is being deleted.
    pub fn deleting(&self) -> bool {
        self.deleting_since.is_some()
    }
}

/// What the shell observed of a selection in one reconcile.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SelectionObservations {
    /// Per entry of `spec.candidates`, in order.
    pub candidates: Vec<VariantObservation>,
    /// The fresh baseline (`workload::fresh_baseline_name`, next session).
    pub fresh_baseline: VariantObservation,
    /// Set when the shell ran the selection's analyses in this reconcile.
    pub analysis: Option<SelectionAnalysis>,
}

/// One variant's Deployment and the share of traffic it gets now.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct VariantObservation {
    /// `None` when the Deployment does not exist.
    pub deployment: Option<DeploymentState>,
    /// Its template carries the variant's config (rolled out is in `deployment`).
    pub runs_spec_config: bool,
    /// Percent of traffic it gets now: its ready pods' share (`replicas`) or its route weight.
    pub share: i32,
}

impl VariantObservation {
    /// It exists with the variant's config and `pods` replicas: nothing to apply, whether or
    /// not its pods are ready yet.
    pub fn applied(&self, pods: i32) -> bool {
        self.runs_spec_config && self.deployment.as_ref().is_some_and(|d| d.replicas == pods)
    }
}

/// What the shell does for a selection.
#[derive(Clone, Debug, PartialEq)]
pub enum SelectionAction {
    /// Create or update candidate `index`'s Deployment (`<target>-candidate-<index+1>`).
    EnsureVariant { index: usize, replicas: i32 },
    /// Create or update the fresh baseline's Deployment (the target's template).
    EnsureFreshBaseline { replicas: i32 },
    /// `gatewayAPI`: set the route's weights, percent: each listed candidate's, the fresh
    /// baseline's; the target's Service gets the rest.
    SetWeights {
        candidates: Vec<(usize, i32)>,
        fresh_baseline: i32,
    },
    /// Delete candidate `index`'s Deployment and Service (eliminated, or the choice is made).
    RemoveVariant { index: usize },
    /// Delete the fresh baseline's Deployment and Service (at 100 %, or finishing), and the
    /// split's baseline Service when there is no candidate to take it (a selection ending).
    RemoveFreshBaseline,
}

/// The target Deployment; present whenever it exists, even with a template the experiment can
/// no longer read (its app container renamed or removed) — it must still be restored.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetState {
    pub deployment: DeploymentState,
    /// The server config read back from the target's pod template; `None` when the app
    /// container is gone.
    pub baseline: Option<RenderedServer>,
    /// The target's template already carries the candidate config (promotion written).
    pub runs_candidate_config: bool,
    /// `workload::TemplateFingerprint` of the pod template, as text.
    pub template_hash: String,
    /// `workload::promoted_fingerprint`: the template with the candidate config rendered in,
    /// env order aside. The same before and after Git brings exactly the candidate config.
    pub promoted_hash: Option<String>,
    /// `workload::promotion_patch`: what to commit so the target runs the candidate config.
    pub promotion_patch: Option<PromotionPatch>,
    /// The target has a deletion timestamp (its namespace is going, or a person deleted it):
    /// there is no baseline to restore any more.
    pub deleting: bool,
}

/// A HorizontalPodAutoscaler whose `scaleTargetRef` is the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Autoscaler {
    pub name: String,
    /// `spec.minReplicas` (default 1).
    pub min_replicas: i32,
    /// `spec.maxReplicas`.
    pub max_replicas: i32,
    /// What the HPA's own rule asks of the candidate's pods (their usage from the resource
    /// metrics API against the HPA's CPU and memory targets). Measured only at 100 % with the
    /// `replicas` router, where the target is at 0 and its HPA does not act.
    pub candidate_need: Option<crate::workload::Need>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// What the shell must do, in order. Each is idempotent: repeating it after a crash is safe.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create or update (server-side apply) the candidate Deployment with this many replicas,
    /// and for `gatewayAPI` its Service.
    EnsureCandidate { replicas: i32 },
    /// Set the target Deployment's `spec.replicas`.
    ScaleTarget { replicas: i32 },
    /// `gatewayAPI`: ensure the baseline/candidate Services and set the HTTPRoute weights,
    /// percent: the candidate's, the fresh baseline's beside it (0: none), the baseline the rest.
    SetRouteWeights {
        candidate_weight: i32,
        fresh_baseline: i32,
    },
    /// `gatewayAPI`: put the HTTPRoute's original backendRefs back.
    RestoreRoute,
    /// Write the candidate server config into the target's pod template.
    PromoteTarget,
    /// Delete the candidate Deployment and the Services the operator made.
    RemoveCandidate,
    /// A deletion released without the baseline restored: every Deployment of the experiment's
    /// that has ready pods (candidate, selection variants, fresh baseline) is let go of — its
    /// owner reference removed, annotated `concurrency.dev/kept-from` — so that it keeps
    /// serving instead of going with the experiment.
    KeepServing,
    /// Remove the `concurrency.dev/approve` annotation from the experiment: it was acted on.
    ClearApproval,
    /// Remove the `concurrency.dev/retry` annotation from the experiment: it was acted on.
    ClearRetry,
    /// Remove the `concurrency.dev/abort` annotation: a retry spent it (it rolled the previous
    /// run back and must not roll the retried one back too).
    ClearAbort,
    /// A selection's variants (docs/selection.md).
    Selection(SelectionAction),
    /// Record a Kubernetes Event on the experiment.
    Event {
        type_: EventType,
        reason: EventReason,
        message: String,
    },
}

impl Action {
    /// Writes an object the user owns — the target Deployment or the HTTPRoute — rather than
    /// one the experiment owns (those go with it by their owner reference). The shell puts the
    /// experiment's finalizer in place before the first such write, so a deletion from then on
    /// restores them; an experiment that never wrote one has nothing to restore and is deleted
    /// without the operator.
    pub fn writes_user_object(&self) -> bool {
        match self {
            Action::ScaleTarget { .. }
            | Action::SetRouteWeights { .. }
            | Action::RestoreRoute
            | Action::PromoteTarget
            | Action::Selection(SelectionAction::SetWeights { .. }) => true,
            Action::EnsureCandidate { .. }
            | Action::RemoveCandidate
            | Action::KeepServing
            | Action::ClearApproval
            | Action::ClearRetry
            | Action::ClearAbort
            | Action::Selection(_)
            | Action::Event { .. } => false,
        }
    }
}

/// The stage machine's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub actions: Vec<Action>,
    pub status: ConcurrencyExperimentStatus,
    /// When to look again even if nothing changes.
    pub requeue_after: Option<Duration>,
    /// Deletion: the baseline is restored and the finalizer may be removed.
    pub release_finalizer: bool,
}
