//! The reconcile shell around the stage machine: watch experiments and the Deployments they
//! touch, observe, decide (`plan::step`), act, write status.
//!
//! API access it needs (the chart's RBAC): `concurrencyexperiments` get/list/watch/patch and
//! `concurrencyexperiments/status` patch; `deployments` get/list/watch/create/patch/delete
//! (a server-side apply that creates is also authorized as `create`); `replicasets` list,
//! `services` list/create/patch/delete and `gateway.networking.k8s.io` `httproutes`
//! get/patch (gatewayAPI router only); `events.k8s.io` `events` create/patch; `coordination.k8s.io` `leases`
//! (leader election, see `crate::leader`).

mod act;
mod analyse;
mod context;
mod error;
mod experiments;
mod observe;
mod reconcile;
mod status;

#[cfg(test)]
mod config_source_tests;
#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod gateway_tests;
#[cfg(test)]
mod metrics_tests;
#[cfg(test)]
mod promote_tests;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use futures::{future, Future, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::controller::Error as ControllerError;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, Controller};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use context::{Context, Settings, FIELD_MANAGER, FINALIZER};
pub use error::Error;
pub use reconcile::{error_policy, reconcile};

use crate::api::ConcurrencyExperiment;
use crate::telemetry::{CancellationToken, Metrics, Readiness};
use crate::workload::LABEL_EXPERIMENT;

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
    let controllers: Vec<Controller<ConcurrencyExperiment>> = scopes
        .iter()
        .map(|ns| controller(client, ns.as_deref(), stop.clone()))
        .collect();
    let stores: Vec<Store<ConcurrencyExperiment>> =
        controllers.iter().map(Controller::store).collect();
    let ctx = Arc::new(Context::new(
        client.clone(),
        config.metrics.clone(),
        config.settings.clone(),
        stores.clone(),
    ));

    let readiness = config.readiness.clone();
    let ready_stop = stop.clone();
    let ready = tokio::spawn(async move {
        for store in &stores {
            tokio::select! {
                _ = ready_stop.cancelled() => return,
                synced = synced(store) => if !synced { return },
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

/// Resolves once the store has its first full list; `false` if its writer is gone.
///
/// kube's `Store::wait_until_ready` waits on a oneshot channel that keeps only the last
/// waiter's waker, and the controller's runner waits on the same store: a second waiter may
/// never be woken. Re-polling on a short timer sidesteps that (the ready state is remembered).
async fn synced(store: &Store<ConcurrencyExperiment>) -> bool {
    loop {
        match tokio::time::timeout(Duration::from_millis(500), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_elapsed) => continue,
        }
    }
}

fn controller(
    client: &Client,
    namespace: Option<&str>,
    stop: CancellationToken,
) -> Controller<ConcurrencyExperiment> {
    let deployments: Api<Deployment> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (store, changed) = experiments::watch(client, namespace);
    let controller = Controller::for_stream(changed, store.clone());
    controller
        // Candidates carry the experiment label; only they are watched as owned objects.
        .owns(
            deployments.clone(),
            watcher::Config::default().labels(LABEL_EXPERIMENT),
        )
        // Any change to a target (scaled by the user, pods becoming ready) is a reason to look.
        .watches(deployments, watcher::Config::default(), move |d| {
            targeting(&store.state(), &d)
        })
        .graceful_shutdown_on(async move { stop.cancelled().await })
}

/// The experiments whose target is this Deployment.
fn targeting(
    experiments: &[Arc<ConcurrencyExperiment>],
    d: &Deployment,
) -> Vec<ObjectRef<ConcurrencyExperiment>> {
    experiments
        .iter()
        .filter(|e| e.namespace() == d.namespace() && e.spec.target_ref.name == d.name_any())
        .map(|e| ObjectRef::from_obj(e.as_ref()))
        .collect()
}

/// How long running reconciles get to finish after shutdown (well within the 30 s a pod gets).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a reconcile waits before looking again after a stage machine asks for no requeue
/// but the watch might miss something (e.g. Prometheus data maturing). Also bounds drift.
pub const RESYNC: Duration = Duration::from_secs(300);
