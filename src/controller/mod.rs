//! The reconcile shell around the stage machine: watch experiments and the Deployments they
//! touch, and reconcile each as a pipeline (`reconcile`): observe (`observe`, the only
//! reads) → measure (`analyse`, `preflight`: Prometheus) → decide (`plan::step`, pure) →
//! commit (`finalizer`, `status`, notifications) → act (`act`) → release or requeue.
//!
//! API access it needs (the chart's RBAC): `concurrencyexperiments` get/list/watch/patch and
//! `concurrencyexperiments/status` patch; `deployments` get/list/watch/create/patch/delete
//! (a server-side apply that creates is also authorized as `create`); `pods` list (only a
//! not-ready candidate's, to explain it); `replicasets` list,
//! `horizontalpodautoscalers` get/list/watch (the target's, only read);
//! `services` list/create/patch/delete and `gateway.networking.k8s.io` `httproutes`
//! get/patch (gatewayAPI router only); `events.k8s.io` `events` create/patch; `coordination.k8s.io` `leases`
//! (leader election, see `crate::leader`).

mod act;
mod analyse;
mod context;
mod deployments;
mod error;
mod events;
mod experiments;
mod finalizer;
mod index;
mod observe;
mod preflight;
mod prometheus;
mod reconcile;
mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::{future, Future, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::runtime::controller::Error as ControllerError;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{reflector, watcher, Controller, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use context::{Caches, Context, Settings, FIELD_MANAGER, FINALIZER};
pub use error::Error;
pub use index::ExperimentIndex;
pub use reconcile::{error_policy, reconcile};

use crate::api::ConcurrencyExperiment;
use crate::notify::deliver::Notifier;
use crate::telemetry::{CancellationToken, Metrics, Readiness};

/// How `run` is set up; built from the command line in `main`.
pub struct RunConfig {
    /// Watched namespaces; empty means all.
    pub namespaces: Vec<String>,
    pub settings: Settings,
    pub metrics: Metrics,
    pub readiness: Readiness,
    /// `Some` when leader election is on: reconcile only while this says `true`.
    pub leader: Option<watch::Receiver<bool>>,
    pub shutdown: CancellationToken,
    /// Where decisions are told (`Notifier::default()` sends nothing).
    pub notifier: Notifier,
}

/// Runs the controllers until `shutdown` is cancelled. With leader election, waits for the
/// lease, runs while it is held, and stops (and waits again) when it is lost.
pub async fn run(client: Client, config: RunConfig) -> Result<(), Error> {
    let Some(mut leader) = config.leader.clone() else {
        run_controllers(&client, &config, future::pending()).await;
        return Ok(());
    };
    // A standby is healthy: it is ready to take over, so it reports ready.
    config.readiness.set_ready(true);
    loop {
        tokio::select! {
            _ = config.shutdown.cancelled() => return Ok(()),
            r = leader.wait_for(|is| *is) => if r.is_err() {
                return Err(Error::Config("leader election stopped".into()));
            },
        }
        tracing::info!("leading: starting controllers");
        config.readiness.set_ready(false);
        let mut watching = leader.clone();
        // Also ends if the election task is gone: no lease, no reconciling.
        let lost = async move {
            let _ = watching.wait_for(|is| !*is).await;
        };
        run_controllers(&client, &config, lost).await;
        // The new leader exports the experiments now; a standby showing its last values
        // would put two different stories on one dashboard.
        config.metrics.retain_experiments(|_, _| false);
        config.metrics.set_experiment_phases([]);
        config.readiness.set_ready(true);
        if config.shutdown.is_cancelled() {
            return Ok(());
        }
        tracing::warn!("leadership lost: controllers stopped");
    }
}

/// One controller per watched namespace (or one for all), sharing one Context.
/// On shutdown running reconciles get `SHUTDOWN_GRACE` to finish; when `lost` resolves
/// (leadership lost) the controllers are dropped at once, since another replica may already
/// be acting (status writes are guarded by resourceVersion either way).
async fn run_controllers(client: &Client, config: &RunConfig, lost: impl Future<Output = ()>) {
    let stop = config.shutdown.clone();
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let indexes: Arc<Vec<Arc<ExperimentIndex>>> =
        Arc::new(scopes.iter().map(|_| Arc::default()).collect());
    let (controllers, stores): (Vec<_>, Vec<_>) = scopes
        .iter()
        .zip(indexes.iter())
        .map(|(ns, index)| {
            let watch = Watch {
                index: index.clone(),
                all: indexes.clone(),
                metrics: config.metrics.clone(),
            };
            controller(client, ns.as_deref(), stop.clone(), watch)
        })
        .unzip();
    let (deployments, autoscalers): (Vec<_>, Vec<_>) = stores.into_iter().unzip();
    let stores: Vec<Store<ConcurrencyExperiment>> =
        controllers.iter().map(Controller::store).collect();
    let caches = Caches {
        experiments: stores.clone(),
        deployments: deployments.clone(),
        autoscalers: autoscalers.clone(),
        indexes: indexes.to_vec(),
        full: Default::default(),
    };
    let ctx = Arc::new(
        Context::new(
            client.clone(),
            config.metrics.clone(),
            config.settings.clone(),
            caches,
        )
        .with_notifier(config.notifier.clone()),
    );

    let readiness = config.readiness.clone();
    let ready_stop = stop.clone();
    let ready = tokio::spawn(async move {
        for store in &stores {
            tokio::select! {
                _ = ready_stop.cancelled() => return,
                synced = context::synced(store) => if !synced { return },
            }
        }
        // Reconciles read targets and candidates from these: not ready before they are full.
        for store in &deployments {
            tokio::select! {
                _ = ready_stop.cancelled() => return,
                synced = context::synced(store) => if !synced { return },
            }
        }
        for store in &autoscalers {
            tokio::select! {
                _ = ready_stop.cancelled() => return,
                synced = context::synced(store) => if !synced { return },
            }
        }
        tracing::info!("caches synced: ready");
        readiness.set_ready(true);
    });

    let runs = controllers.into_iter().map(|c| {
        c.run(reconcile, error_policy, ctx.clone())
            .for_each(|result| async move {
                // Errors are logged, never fatal: one bad object must not stop the others.
                match result {
                    Ok((obj, _)) => tracing::debug!(experiment = %obj, "reconciled"),
                    // A requeue for an experiment deleted meanwhile: nothing left to do.
                    Err(ControllerError::ObjectNotFound(obj)) => {
                        tracing::debug!(experiment = %obj, "gone before its requeue")
                    }
                    Err(e) => tracing::warn!(error = %e, "controller"),
                }
            })
    });
    let all = futures::future::join_all(runs);
    // Graceful shutdown lets running reconciles finish, but a controller whose caches never
    // synced does not end on its own; past the grace period it is dropped (every action is
    // idempotent, so an interrupted reconcile is simply redone by the next leader).
    let grace = async {
        stop.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        _ = all => {}
        _ = grace => tracing::warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; dropping them"),
        _ = lost => {}
    }
    ready.abort();
}

/// What one scope's experiment watch keeps up to date besides its store.
struct Watch {
    index: Arc<ExperimentIndex>,
    all: Arc<Vec<Arc<ExperimentIndex>>>,
    metrics: Metrics,
}

/// One scope's controller, and its caches of Deployments (targets and candidates alike) and
/// HorizontalPodAutoscalers.
///
/// One Deployment watch serves both roles: a candidate wakes the experiment that owns it, a
/// target the experiments that name it (from the index, not a scan). Reconciles read both
/// from the cache, so an experiment costs no API call unless something is to be written.
fn controller(
    client: &Client,
    namespace: Option<&str>,
    stop: CancellationToken,
    watch: Watch,
) -> (
    Controller<ConcurrencyExperiment>,
    (Store<Deployment>, Store<HorizontalPodAutoscaler>),
) {
    let api: Api<Deployment> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let hpa_api: Api<HorizontalPodAutoscaler> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let Watch {
        index,
        all,
        metrics,
    } = watch;
    let (store, changed) = experiments::watch(client, namespace, index.clone(), all, metrics);
    let (deployments, writer) = reflector::store();
    let kept = index.clone();
    let touched = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(move |d| {
                let whole = deployments::kept_whole(&kept, d);
                deployments::slim(d, whole)
            }),
    )
    .touched_objects();
    let (autoscalers, hpa_writer) = reflector::store();
    let scaled = reflector::reflector(
        hpa_writer,
        watcher(hpa_api, watcher::Config::default())
            .default_backoff()
            .modify(|h: &mut HorizontalPodAutoscaler| h.metadata.managed_fields = None),
    )
    .touched_objects();
    let hpa_index = index.clone();
    let controller = Controller::for_stream(changed, store)
        .watches_stream(touched, move |d| waking(&index, &d))
        .watches_stream(scaled, move |h| waking_autoscaler(&hpa_index, &h))
        .graceful_shutdown_on(async move { stop.cancelled().await });
    (controller, (deployments, autoscalers))
}

/// The experiments a Deployment event concerns: the one that owns it (a candidate) and the
/// ones that name it as their target.
fn waking(index: &ExperimentIndex, d: &Deployment) -> Vec<ObjectRef<ConcurrencyExperiment>> {
    let ns = d.namespace().unwrap_or_default();
    let owner = deployments::owning_experiment(d).map(str::to_string);
    owner
        .into_iter()
        .chain(index.targeting(&ns, &d.name_any()))
        .map(|name| ObjectRef::new(&name).within(&ns))
        .collect()
}

/// The experiments an HPA event concerns: the owner of a candidate's copy, and those whose
/// target it scales.
fn waking_autoscaler(
    index: &ExperimentIndex,
    h: &HorizontalPodAutoscaler,
) -> Vec<ObjectRef<ConcurrencyExperiment>> {
    let ns = h.namespace().unwrap_or_default();
    let owner = h
        .owner_references()
        .iter()
        .filter(|o| o.controller == Some(true) && o.kind == "ConcurrencyExperiment")
        .map(|o| o.name.clone());
    let scaled = h
        .spec
        .as_ref()
        .filter(|s| s.scale_target_ref.kind == "Deployment")
        .map(|s| index.targeting(&ns, &s.scale_target_ref.name))
        .unwrap_or_default();
    owner
        .chain(scaled)
        .map(|name| ObjectRef::new(&name).within(&ns))
        .collect()
}

/// How long running reconciles get to finish after shutdown (well within the 30 s a pod gets).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests;
