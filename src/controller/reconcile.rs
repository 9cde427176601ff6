//! One reconcile: observe → (analysis when due) → stage machine → finalizer (before the first
//! write to the user's objects) → status → act → finalizer released (deleted and restored).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::act::Actor;
use super::context::{Context, FIELD_MANAGER, FINALIZER};
use super::error::{is_invalid, is_not_found, Error, Result};
use super::observe;
use super::status::{self, Written};
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus, DecisionAction, Phase};
use crate::notify;
use crate::plan::{self, Step};
use crate::telemetry;

/// How long a reconcile waits before looking again after a stage machine asks for no requeue
/// but the watch might miss something (e.g. Prometheus data maturing). Also bounds drift.
const RESYNC: Duration = Duration::from_secs(300);

/// How long a reconcile waits for the Deployment cache's first list before requeueing.
const CACHE_WAIT: Duration = Duration::from_secs(5);

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

async fn reconcile_inner(exp: &ConcurrencyExperiment, ctx: &Context) -> Result<Requeue> {
    let ns = exp.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<ConcurrencyExperiment> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = exp.meta().deletion_timestamp.is_some();
    let has_finalizer = exp.finalizers().iter().any(|f| f == FINALIZER);
    if deleting && !has_finalizer {
        // Nothing of the user's to restore: the experiment never wrote the target or the
        // route (the finalizer comes before the first such write), or it was released
        // already. What it created goes with it by owner reference.
        ctx.metrics.remove_experiment(&ns, &exp.name_any());
        return Ok(Requeue::await_change());
    }

    // Targets and candidates come from the Deployment cache: before its first full list an
    // absent target only means "not listed yet" — deciding then would roll back a running
    // experiment as `TargetMissing` right after an operator restart.
    // Likewise an HPA not listed yet would be split around as if there were none.
    let caches = &ctx.caches;
    let unsynced = if !all_synced(&caches.deployments).await {
        Some("Deployment")
    } else if !all_synced(&caches.autoscalers).await {
        Some("HPA")
    } else {
        None
    };
    if let Some(what) = unsynced {
        tracing::info!(experiment = %key(exp), "{what} cache not synced yet; looking again soon");
        return Ok(Requeue::requeue(Duration::from_secs(1)));
    }
    let fetched = super::fetch::fetch(&ctx.client, &ctx.caches, exp).await?;
    // The plan's clock has the API server's precision (whole seconds): a time it stores reads
    // back as it was decided, so a message made from it (a selection's due time) does not
    // change on the next reconcile and cost a status write.
    let now = jiff::Timestamp::now();
    let now = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    let mut observations = observe::observations(exp, &fetched, now);
    // The spec checks that need the operator's configuration: its Prometheus providers and
    // its policy on candidate overrides.
    if observations.spec_error.is_none() {
        if let Err(e) = ctx.prometheus.resolve(exp) {
            observations.spec_error = Some(e.to_string());
        }
    }
    if observations.spec_error.is_none() && !ctx.settings.allow_candidate_overrides {
        observations.spec_error = crate::api::policy::forbidden_override(&exp.spec);
    }
    if deleting {
        observations.namespace_terminating = ctx.namespaces.terminating(&ctx.client, &ns).await;
    }
    let current = exp.status.clone().unwrap_or_default();

    if !deleting
        && observations.spec_error.is_none()
        && plan::analysis_due(&exp.spec, &current, now)
    {
        match observations.selection.as_mut() {
            // A selection's interval: every candidate against the fresh baseline.
            Some(sel) if current.phase == Phase::Selecting => {
                let ran = super::analyse::run_selection(ctx, exp, &fetched, &current, sel, now);
                if let Some((analysis, baselines)) = ran.await? {
                    sel.analysis = Some(analysis);
                    observations.baselines = baselines;
                }
            }
            _ => {
                let weight = observations.effective_weight;
                let ran = super::analyse::run(ctx, exp, &fetched, &current, weight, now);
                if let Some((outcome, baselines)) = ran.await? {
                    observations.analysis = Some(outcome);
                    observations.baselines = baselines;
                }
            }
        }
    }

    // Before anything is created, once: every check's series must exist for the target's pods.
    if !deleting
        && ctx.settings.preflight
        && observations.spec_error.is_none()
        && observations.not_ours.is_empty()
        && !observations.abort_requested
        && plan::preflight_due(&current)
    {
        observations.preflight = super::preflight::run(ctx, exp, &fetched, now).await;
    }

    let step = plan::step(&exp.spec, &current, &observations);

    // The finalizer goes on just before the first write to the user's target or route, not at
    // creation: an experiment that has only created its own objects is deleted by the API
    // server and the garbage collector alone, with no write of the operator's (500 waiting
    // experiments: 7–9 s instead of 31). From this write on, a deletion restores what it
    // changed.
    let held;
    let exp = if !has_finalizer && step.actions.iter().any(plan::Action::writes_user_object) {
        match add_finalizer(&api, exp).await? {
            FinalizerPatch::Applied(patched) => {
                held = *patched;
                &held
            }
            // Deleted meanwhile (the API server adds no finalizer to an object being deleted)
            // or its finalizers changed: nothing written; look again with a fresh copy.
            FinalizerPatch::Gone | FinalizerPatch::Stale => {
                return Ok(Requeue::requeue(Duration::from_millis(500)))
            }
        }
    } else {
        exp
    };

    // Status first: the decision is on record before anything changes, and a decision made
    // from a stale status (someone else wrote meanwhile) is dropped instead of acted on.
    let written = status::write(&api, exp, &step.status, &ctx.settings.field_manager).await?;
    match written {
        Written::Superseded => {
            tracing::info!(experiment = %key(exp), "status changed meanwhile; deciding again");
            return Ok(Requeue::requeue(Duration::from_millis(500)));
        }
        Written::Gone => {
            ctx.metrics.remove_experiment(&ns, &exp.name_any());
            return Ok(Requeue::await_change());
        }
        Written::Unchanged | Written::Saved => {
            publish_gauges(ctx, exp, &ns, &step.status, now);
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
            .notify(notify::derive(exp, &step.status, &step.actions, now));
    }
    let original_route = step
        .status
        .original
        .as_ref()
        .and_then(|o| o.route_backend_refs.as_deref());
    // The actions render from the status just decided: the step that chooses a selection's
    // winner also creates its candidate, and the stored status does not name it yet.
    let decided = ConcurrencyExperiment {
        status: Some(step.status.clone()),
        ..exp.clone()
    };
    Actor::new(ctx, &decided, &fetched, original_route)?
        .execute(&step.actions)
        .await?;
    record_metrics(ctx, &exp.spec, &current, &step, &observations);

    if deleting && step.release_finalizer {
        if let FinalizerPatch::Stale = remove_finalizer(&api, exp).await? {
            return Ok(Requeue::requeue(Duration::from_millis(500)));
        }
        ctx.metrics.remove_experiment(&ns, &exp.name_any());
        return Ok(Requeue::await_change());
    }
    // A write's effect on a watched object wakes the experiment by itself; an HTTPRoute is not
    // watched, so any write is followed by a look soon after.
    let wrote = step
        .actions
        .iter()
        .any(|a| !matches!(a, plan::Action::Event { .. }));
    Ok(match step.requeue_after {
        Some(d) if wrote => Requeue::requeue(d.min(plan::AFTER_WRITE)),
        Some(d) => Requeue::requeue(d),
        // A slow resync in case a watch event is missed; cheap for finished experiments.
        None => Requeue::requeue(RESYNC),
    })
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

/// What a finalizer patch did.
enum FinalizerPatch {
    /// Written; the experiment as the API server stored it (its new resourceVersion guards the
    /// status write that follows).
    Applied(Box<ConcurrencyExperiment>),
    /// The experiment is gone (404).
    Gone,
    /// The finalizers changed since this copy was read (the cache lags our own previous patch,
    /// someone else wrote, or the experiment is being deleted and takes no new finalizer): a
    /// 422 from the patch's `test`; nothing done, look again with a fresh copy.
    Stale,
}

/// JSON patch with a `test` of the current list, so two writers never lose each other's
/// finalizers (a failed test is a 422 and the reconcile retries from a fresh read).
async fn add_finalizer(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
) -> Result<FinalizerPatch> {
    let patch = match &exp.meta().finalizers {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
        Some(current) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ]),
    };
    json_patch(api, exp, patch).await
}

/// As `add_finalizer`; `Gone` is success here (an earlier release let the deletion finish).
async fn remove_finalizer(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
) -> Result<FinalizerPatch> {
    let finalizers = exp.finalizers();
    let Some(index) = finalizers.iter().position(|f| f == FINALIZER) else {
        return Ok(FinalizerPatch::Gone);
    };
    let patch = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]);
    json_patch(api, exp, patch).await
}

/// The finalizer patches carry a `test` of what they change, so two writers never drop each
/// other's finalizers; a failed test is the apiserver's 422 (500 experiments created at once
/// showed a few: a Deployment event reconciled a cached copy from before our own patch).
async fn json_patch(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
    patch: serde_json::Value,
) -> Result<FinalizerPatch> {
    let patch = serde_json::from_value(patch).map_err(|source| Error::Serialize {
        what: "finalizer patch",
        source,
    })?;
    let patched = api
        .patch(
            &exp.name_any(),
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            },
            &Patch::Json::<()>(patch),
        )
        .await;
    match patched {
        Ok(stored) => Ok(FinalizerPatch::Applied(Box::new(stored))),
        Err(e) if is_not_found(&e) => Ok(FinalizerPatch::Gone),
        Err(e) if is_invalid(&e) => {
            tracing::info!(experiment = %key(exp), "finalizers changed meanwhile; looking again");
            Ok(FinalizerPatch::Stale)
        }
        Err(e) => Err(e.into()),
    }
}

/// Every store has had its first full list, waiting at most `CACHE_WAIT` for each.
async fn all_synced<K>(stores: &[kube::runtime::reflector::Store<K>]) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    for store in stores {
        let ready = tokio::time::timeout(CACHE_WAIT, super::context::synced(store)).await;
        if !matches!(ready, Ok(true)) {
            return false;
        }
    }
    true
}
