//! The stage machine: a pure function from (spec, status, observations) to (actions, new
//! status). No I/O here, so every transition is a plain unit test and a restarted operator
//! resumes from status alone.
//!
//! The shell drives it once per reconcile, in the steps `controller::reconcile` names:
//! observe (`Observations`: target and candidate, `effective_weight` from
//! `traffic::Router::effective_weight`, flags, deletion) → measure (an analysis when
//! `analysis_due`, into `Observations::analysis`; the pre-flight when `preflight_due`) →
//! `step` → commit (the finalizer before the first action that `writes_user_object`, then
//! `Step::status`) → act (`Step::actions` in order) → release the finalizer when
//! `Step::release_finalizer`, else requeue after `Step::requeue_after`. Every action is
//! repeated by later steps until its effect is observed, so writing status first and crashing
//! in between is safe; events are emitted once, on the transition.
//!
//! For `gatewayAPI` the shell reports the route's backendRefs while the route is not split
//! (`Observations::route_backend_refs`); the machine records them in
//! `status.original.routeBackendRefs` with the first status that has `original`, before its
//! first `SetRouteWeights`. Everything that depends on the router is asked of
//! `traffic::Router`.
//!
//! Choices: abort is ignored once Promoting (the target may already carry the candidate
//! config; there is no action to revert a template). Deleting mid-flight rolls back (decision
//! `Deleted`), also from Promoting — if `PromoteTarget` was already written the target keeps
//! the candidate config. A spec that becomes invalid mid-flight rolls back (`InvalidSpec`);
//! `Invalid` itself is only reached before anything was created. Approval (see `approval`):
//! `spec.approved` is a level that approves a manual promotion only; the approve annotation is
//! one-shot — it lifts the next hold (an inconclusive hold, resetting the count, or the manual
//! promotion) and the machine then asks for its removal (`Action::ClearApproval`).
//! `promotion: external` (see `external`) holds at the last stage for Git instead and never
//! asks for `PromoteTarget`; a promotion gate held for another mode than the spec's is lifted.
//! Retry (see `retry`): the retry annotation runs a `RolledBack` experiment again from stage 1
//! with a fresh status; it is one-shot like approve (`Action::ClearRetry`).
//! If candidate pods lose readiness after a stage's split was in force (see `readiness`),
//! their share goes back to the baseline at once (`replicas`: the target grows by the missing
//! pods; `gatewayAPI`: the route keeps the ready pods at the stage's share per pod), the stage
//! does not end until they are back (Event `CandidateUnready`), and the analyses judge it. A
//! last stage of 100 % keeps one baseline pod as a standby (`replicas`, no HPA) until an
//! analysis there passed (Event `StandbyReleased`): the target is never scaled to 0 before the
//! candidate carried the share. A split that is never in force is
//! bounded by `spec.progressDeadline`, counted from `status.stageEnteredAt` (not while
//! `spec.paused`): then the experiment rolls back (`ProgressDeadlineExceeded`, naming
//! `Observations::candidate_problem`).
//! A split is in force only when every candidate pod runs the spec's config
//! (`candidate_runs_spec_config`, rolled out). Editing `spec.candidate` while Progressing or
//! Paused restarts at stage 1 with a fresh history (Event `SpecChanged`): what was measured
//! belongs to the old config. A candidate shrinks only once its traffic is back on the
//! baseline.
//!
//! Capacity (see `capacity`): before each weight step the candidate's per-pod load at the next
//! stage (the measured total rate × that stage's real share / its candidate pods) is compared
//! with its estimated capacity from the CPU and I/O time per request measured in the current
//! stage. Above `spec.analysis.maxPredictedUtilization` the experiment rolls back
//! (`InsufficientCapacity`) or, with `onInconclusive: pause`, holds until the approve annotation
//! takes the step anyway; without the measurements the step waits, and each analysis that
//! passes without them counts as inconclusive. The shell passes the candidate's CPU limit in
//! `Observations::candidate_cpu_limit`. At the start the experiment says when the replicas
//! router cannot give the planned weights (Event `CoarseSplit`, `status.plannedEffectiveWeights`).
//!
//! Someone else changing things mid-flight (docs/operations.md has the table): a target pod
//! template other than the one fingerprinted at the start (`original.templateHash`) rolls back
//! (`TargetChanged`) while Progressing/Paused, and in Promoting until the promotion is seen
//! written — what was judged is gone, and the candidate config must not land on an unjudged
//! template; held for an external promotion, the candidate config and nothing else is the
//! awaited completion instead. A target replica count the experiment did not set (`targetScale`: the last count
//! it asked for and the one before; nor `original.replicas`) is the person's new size for the
//! target: it becomes `original.replicas` (Event `TargetScaled`). An object by the names the
//! experiment writes that it did not create (`Observations::not_ours`) makes a Pending
//! experiment `Invalid` and rolls a running one back (`NotOwned`), never touching it.
//!
//! Pre-flight (see `preflight`): while Pending, before anything is created, the shell looks up
//! every check's series for the target's pods (`preflight_due`, `Observations::preflight`); a
//! series that never existed makes the experiment `Invalid` (`SeriesMissing`), series it cannot
//! judge yet are noted (`SeriesNotChecked`), Prometheus failing is looked at again within
//! `spec.progressDeadline`, and a pass is kept in `status.preflight` so it is never repeated.
//! With the pass comes the target's measured request rate (`Observations::target_rate`): stages
//! that cannot reach the checks' data at it are warned of (`TooFewRequests`, `analysis::reach`).
//!
//! Selection (`select`, `elimination`, `ranking`; docs/selection.md): with `spec.candidates`
//! Pending goes to `Selecting`, where every candidate and a fresh baseline run on equal shares
//! on top of the untouched target (`traffic::Router::selection_split`), each interval's
//! `Observations::selection` analyses eliminate failing candidates one by one, and after
//! `selection.duration` the ranking picks the winner, which enters stage 1 as the candidate
//! (`Ctx::candidate`); the shell runs its analyses (`controller::analyse::run_selection`).

mod analysis;
mod approval;
mod capacity;
pub mod conditions;
pub mod controls;
mod ctx;
mod deadline;
mod elimination;
mod external;
mod finish;
mod first_step;
mod fresh;
mod improvement;
mod leftovers;
mod machine;
mod observations;
mod pause;
mod preflight;
mod progress;
pub mod ranking;
mod readiness;
mod retry;
mod scale_down;
mod select;
mod split;
mod timing;
mod validate;

pub use analysis::{
    failing_checks, only_waiting, shown_no_worse, shown_worse, INCONCLUSIVE_LIMIT, KEPT_ANALYSES,
    NO_DATA_LIMIT,
};
pub use capacity::{CAPACITY_GATE_OFF, CAPACITY_UNKNOWN, INSUFFICIENT_CAPACITY};
pub use elimination::{CANDIDATE_ELIMINATED, LOW_SIGNAL_UTILIZATION};
pub use machine::{carries_the_whole_load, step, AUTOSCALE_PERIOD};
pub use observations::*;
pub use pause::PAUSED_BY_USER;
pub use preflight::{
    preflight_due, AWAITING_SERIES, PREFLIGHT_RETRY, QUEUE_TIME_COARSE, SERIES_MISSING,
    SERIES_NOT_CHECKED, TOO_FEW_REQUESTS,
};
pub use progress::{AWAITING_APPROVAL, AWAITING_EXTERNAL_PROMOTION, PROGRESS_DEADLINE_EXCEEDED};
pub use select::CANDIDATE_CHOSEN;
pub use split::fresh_baseline;
pub use timing::{analysis_due, deadline_passed, next_analysis_at, AFTER_WRITE, POLL, TARGET_POLL};
pub use validate::{validate, Timing};

#[cfg(test)]
mod tests;
