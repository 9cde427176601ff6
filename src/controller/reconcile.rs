//! One reconcile, a pipeline read top to bottom in `reconcile_inner`: observe (the only
//! reads) → measure (the analysis and pre-flight I/O, when due) → decide (`plan::step`, pure)
//! → commit (finalizer, status, notification) → act → release the finalizer (deleted and
//! restored) or requeue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::act::Actor;
use super::context::{Context, FINALIZER};
use super::error::{Error, Result};
use super::finalizer::{self, FinalizerPatch};
use super::observe::fetch::Fetched;
use super::observe::{observe, Observed, Unsynced};
use super::status::{self, Written};
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus, DecisionAction, Phase};
use crate::notify;
use crate::plan::{self, Step};
use crate::telemetry;

/// How long a reconcile waits before looking again after a stage machine asks for no requeue
/// but the watch might miss something (e.g. Prometheus data maturing). Also bounds drift.
const RESYNC: Duration = Duration::from_secs(300);

/// Entry point for the controller: times the reconcile, records errors as metric and Event.
pub async fn reconcile(exp: Arc<ConcurrencyExperiment>, ctx: Arc<Context>) -> Result<Requeue> {
    let started = Instant::now();
    let result = reconcile_inner(&exp, &ctx).await;
    ctx.metrics.observe_reconcile(started.elapsed());
    match &result {
        Ok(_) => ctx.clear_failures(&key(&exp)),
        Err(e) => {
            // The error policy cannot await, so the Warning Event is sent here.
            let event = super::events::event(EventType::Warning, e.category(), &e.to_string());
            if let Err(err) = ctx.recorder.publish(&event, &exp.object_ref(&())).await {
                tracing::warn!(error = %err, "could not publish error event");
            }
        }
    }
    result
}

/// Failed reconciles retry with a per-experiment exponential backoff.
pub fn error_policy(exp: Arc<ConcurrencyExperiment>, error: &Error, ctx: Arc<Context>) -> Requeue {
    ctx.metrics.record_reconcile_error(error.category());
    let delay = ctx.backoff_after_failure(&key(&exp));
    tracing::warn!(
        experiment = %key(&exp),
        category = error.category(),
        error = %error,
        retry_in = ?delay,
        "reconcile failed"
    );
    Requeue::requeue(delay)
}

fn key(exp: &ConcurrencyExperiment) -> String {
    format!("{}/{}", exp.namespace().unwrap_or_default(), exp.name_any())
}

/// One reconcile, as a pipeline: observe → measure → decide → commit → act → release or
/// requeue. Each step is a function below (or a module: `observe`, `plan::step`, `act`).
async fn reconcile_inner(exp: &ConcurrencyExperiment, ctx: &Context) -> Result<Requeue> {
    let ns = exp.namespace().ok_or(Error::MissingNamespace)?;
    let deleting = exp.meta().deletion_timestamp.is_some();
    if deleting && !exp.finalizers().iter().any(|f| f == FINALIZER) {
        // Nothing of the user's to restore: the experiment never wrote the target or the
        // route (the finalizer comes before the first such write), or it was released
        // already. What it created goes with it by owner reference.
        ctx.metrics.remove_experiment(&ns, &exp.name_any());
        return Ok(Requeue::await_change());
    }
    let Observed {
        fetched,
        mut observations,
        now,
    } = match observe(ctx, exp, deleting).await? {
        Ok(seen) => seen,
        Err(Unsynced(what)) => {
            tracing::info!(experiment = %key(exp), "{what} cache not synced yet; looking again soon");
            return Ok(Requeue::requeue(Duration::from_secs(1)));
        }
    };
    let current = exp.status.clone().unwrap_or_default();
    if !deleting {
        measure(ctx, exp, &fetched, &current, &mut observations, now).await?;
    }
    let step = plan::step(&exp.spec, &current, &observations);
    let api: Api<ConcurrencyExperiment> = Api::namespaced(ctx.client.clone(), &ns);
    let exp = match commit(ctx, &api, exp, &step, &observations, now).await? {
        Committed::Stored(exp) => *exp,
        Committed::LookAgain(requeue) => return Ok(requeue),
    };
    act(ctx, &exp, &fetched, &step).await?;
    record_metrics(ctx, &exp.spec, &current, &step, &observations);
    if deleting && step.release_finalizer {
        if let FinalizerPatch::Stale = finalizer::remove(&api, &exp).await? {
            return Ok(Requeue::requeue(Duration::from_millis(500)));
        }
        ctx.metrics.remove_experiment(&ns, &exp.name_any());
        return Ok(Requeue::await_change());
    }
    Ok(requeue(&step))
}

/// Measure: the Prometheus I/O the stage machine asks for — an analysis when one is due (a
/// selection's: every candidate against the fresh baseline), and once, before anything is
/// created, the pre-flight lookup of every check's series.
async fn measure(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    current: &ConcurrencyExperimentStatus,
    observations: &mut plan::Observations,
    now: jiff::Timestamp,
) -> Result<()> {
    if observations.spec_error.is_some() {
        return Ok(());
    }
    if plan::analysis_due(&exp.spec, current, now) {
        match observations.selection.as_mut() {
            Some(sel) if current.phase == Phase::Selecting => {
                let ran = super::analyse::run_selection(ctx, exp, fetched, current, sel, now);
                if let Some((analysis, baselines)) = ran.await? {
                    sel.analysis = Some(analysis);
                    observations.baselines = baselines;
                }
            }
            _ => {
                let weight = observations.effective_weight;
                let ran = super::analyse::run(ctx, exp, fetched, current, weight, now);
                if let Some((outcome, baselines)) = ran.await? {
                    observations.analysis = Some(outcome);
                    observations.baselines = baselines;
                }
            }
        }
    }
    if ctx.settings.preflight
        && observations.not_ours.is_empty()
        && !observations.abort_requested
        && plan::preflight_due(current)
    {
        if let Some(looked) = super::preflight::run(ctx, exp, fetched, now).await {
            observations.preflight = Some(looked.found);
            observations.target_rate = looked.rate;
            observations.queue_clock = looked.queue_clock;
        }
    }
    Ok(())
}

/// What committing a step did.
enum Committed {
    /// The decision is on record; the experiment as stored (after a finalizer patch, its new
    /// resourceVersion).
    Stored(Box<ConcurrencyExperiment>),
    /// Nothing acted on: the experiment changed or went meanwhile.
    LookAgain(Requeue),
}

/// Commit: the finalizer (just before the first write to the user's objects), the status
/// (before any action: a decision made from a stale status is dropped instead of acted on),
/// the per-experiment series, and the notification of a stored transition.
async fn commit(
    ctx: &Context,
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
    step: &Step,
    observations: &plan::Observations,
    now: jiff::Timestamp,
) -> Result<Committed> {
    let ns = exp.namespace().unwrap_or_default();
    let has_finalizer = exp.finalizers().iter().any(|f| f == FINALIZER);
    // The finalizer goes on just before the first write to the user's target or route, not at
    // creation: an experiment that has only created its own objects is deleted by the API
    // server and the garbage collector alone, with no write of the operator's (500 waiting
    // experiments: 7–9 s instead of 31). From this write on, a deletion restores what it
    // changed.
    let exp = if !has_finalizer && step.actions.iter().any(plan::Action::writes_user_object) {
        match finalizer::add(api, exp).await? {
            FinalizerPatch::Applied(patched) => *patched,
            // Deleted meanwhile (the API server adds no finalizer to an object being deleted)
            // or its finalizers changed: nothing written; look again with a fresh copy.
            FinalizerPatch::Gone | FinalizerPatch::Stale => {
                return Ok(Committed::LookAgain(Requeue::requeue(
                    Duration::from_millis(500),
                )))
            }
        }
    } else {
        exp.clone()
    };
    let written = status::write(api, &exp, &step.status, &ctx.settings.field_manager).await?;
    match written {
        Written::Superseded => {
            tracing::info!(experiment = %key(&exp), "status changed meanwhile; deciding again");
            return Ok(Committed::LookAgain(Requeue::requeue(
                Duration::from_millis(500),
            )));
        }
        Written::Gone => {
            ctx.metrics.remove_experiment(&ns, &exp.name_any());
            return Ok(Committed::LookAgain(Requeue::await_change()));
        }
        Written::Unchanged | Written::Saved => {
            publish_gauges(ctx, &exp, &ns, &step.status, now);
            // Counted once it is on record, whatever happens to the actions.
            if let Some(outcome) = &observations.analysis {
                let verdict = outcome.record.verdict;
                ctx.metrics
                    .count_experiment_analysis(&ns, &exp.name_any(), verdict);
            }
        }
    }
    // Only the reconcile that stored the transition tells it: a replay (after a restart, on
    // another leader) finds it in status, and the machine emits no Event for it again.
    if written == Written::Saved && ctx.notifier.is_enabled() {
        ctx.notifier
            .notify(notify::derive(&exp, &step.status, &step.actions, now));
    }
    Ok(Committed::Stored(Box::new(exp)))
}

/// Act: the step's actions, rendered from the status just decided — the step that chooses a
/// selection's winner also creates its candidate, and the stored status does not name it yet.
async fn act(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    step: &Step,
) -> Result<()> {
    let original_route = step
        .status
        .original
        .as_ref()
        .and_then(|o| o.route_backend_refs.as_deref());
    let decided = ConcurrencyExperiment {
        status: Some(step.status.clone()),
        ..exp.clone()
    };
    Actor::new(ctx, &decided, fetched, original_route)?
        .execute(&step.actions)
        .await
}

/// When to look again. A write's effect on a watched object wakes the experiment by itself;
/// an HTTPRoute is not watched, so any write is followed by a look soon after.
fn requeue(step: &Step) -> Requeue {
    let wrote = step
        .actions
        .iter()
        .any(|a| !matches!(a, plan::Action::Event { .. }));
    match step.requeue_after {
        Some(d) if wrote => Requeue::requeue(d.min(plan::AFTER_WRITE)),
        Some(d) => Requeue::requeue(d),
        // A slow resync in case a watch event is missed; cheap for finished experiments.
        None => Requeue::requeue(RESYNC),
    }
}

/// The per-experiment gauges follow the status just stored; a long-finished experiment's
/// series are dropped instead, so they stay bounded by the experiments worth watching.
fn publish_gauges(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    ns: &str,
    status: &ConcurrencyExperimentStatus,
    now: jiff::Timestamp,
) {
    if telemetry::keeps_series(status, now) {
        ctx.metrics.set_experiment(ns, &exp.name_any(), status);
    } else {
        ctx.metrics.remove_experiment(ns, &exp.name_any());
    }
}

fn record_metrics(
    ctx: &Context,
    spec: &crate::api::ConcurrencyExperimentSpec,
    before: &ConcurrencyExperimentStatus,
    step: &Step,
    observations: &plan::Observations,
) {
    if let Some(outcome) = &observations.analysis {
        ctx.metrics.record_analysis(outcome.record.verdict);
        for check in &outcome.record.checks {
            let metric = spec
                .analysis
                .checks
                .iter()
                .find(|c| c.display_name() == check.name)
                .and_then(|c| c.metric);
            ctx.metrics.record_check_result(metric, check.verdict);
        }
    }
    let after = &step.status;
    if after.phase != before.phase {
        match after.phase {
            Phase::Succeeded => ctx.metrics.record_promotion(),
            Phase::RolledBack => {
                let reason = after
                    .decision
                    .as_ref()
                    .filter(|d| d.action == DecisionAction::Rollback)
                    .map(|d| d.reason.as_str())
                    .unwrap_or("Unknown");
                ctx.metrics.record_rollback(reason);
            }
            _ => {}
        }
    }
    // The phase gauge and the series of deleted experiments follow the experiment watch
    // (controller::index), not this reconcile: recounting here was a scan of every experiment.
}
