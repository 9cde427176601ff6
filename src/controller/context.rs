//! What every reconcile shares: the API client, the event recorder, metrics and settings.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use super::deployments::{self, FullCopies};
use super::error::Result;
use super::index::ExperimentIndex;
use super::prometheus::PrometheusClients;
use crate::api::ConcurrencyExperiment;

use crate::notify::deliver::Notifier;
use crate::telemetry::Metrics;

/// The one field manager for everything the operator applies or patches, so ownership in
/// `managedFields` is always attributable and never split between names.
pub const FIELD_MANAGER: &str = "concurrency-operator";

/// Added on the first reconcile; removed only once the stage machine says the baseline is
/// restored, so deleting an experiment mid-flight never strands traffic on the candidate.
pub const FINALIZER: &str = "concurrency.dev/restore-baseline";

#[derive(Clone, Debug)]
pub struct Settings {
    pub field_manager: String,
    /// Timeout of each Prometheus query made by an analysis.
    pub prometheus_timeout: Duration,
    /// The operator-wide Prometheus providers (`--prometheus-config`).
    pub prometheus: crate::prometheus::ProvidersConfig,
    /// How long to wait before retrying a failed reconcile (doubles per consecutive failure).
    pub error_backoff: Duration,
    /// Longest wait between two failed reconciles.
    pub max_error_backoff: Duration,
    /// Look up every check's series before a Pending experiment creates anything
    /// (`--preflight`; docs/experiment-reference.md, "Pre-flight").
    pub preflight: bool,
    /// Candidates may set command, args and env (`--allow-candidate-overrides`; `api::policy`).
    pub allow_candidate_overrides: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            field_manager: FIELD_MANAGER.into(),
            prometheus_timeout: Duration::from_secs(10),
            prometheus: Default::default(),
            error_backoff: Duration::from_secs(5),
            max_error_backoff: Duration::from_secs(300),
            preflight: true,
            allow_candidate_overrides: true,
        }
    }
}

/// The watch caches reconciles read from, one entry per watched scope (a namespace, or all).
#[derive(Clone, Default)]
pub struct Caches {
    pub experiments: Vec<Store<ConcurrencyExperiment>>,
    pub deployments: Vec<Store<Deployment>>,
    /// HorizontalPodAutoscalers per scope: the target's, and the candidate's copy.
    pub autoscalers: Vec<Store<HorizontalPodAutoscaler>>,
    pub indexes: Vec<Arc<ExperimentIndex>>,
    /// Whole copies of Deployments the cache holds metadata-only (`deployments`).
    pub full: Arc<FullCopies>,
}

impl Caches {
    /// A Deployment, whole, from the cache (`deployments::read`), `None` when it does not
    /// exist (as far as the watch knows).
    pub async fn deployment(
        &self,
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Deployment>> {
        deployments::read(client, &self.deployments, &self.full, namespace, name).await
    }

    /// The experiments in `namespace` whose target is `deployment` (from the index).
    /// The HPA that scales Deployment `deployment`. A scan of the scope's HPAs — a few per
    /// namespace at most, and no API call — rather than another index to keep.
    pub fn autoscaler_of(
        &self,
        namespace: &str,
        deployment: &str,
    ) -> Option<HorizontalPodAutoscaler> {
        let all: Vec<_> = self
            .autoscalers
            .iter()
            .flat_map(|s| s.state())
            .filter(|h| h.namespace().as_deref() == Some(namespace))
            .collect();
        crate::workload::target_autoscaler(all.iter().map(|h| h.as_ref()), deployment).cloned()
    }

    pub fn targeting(&self, namespace: &str, deployment: &str) -> Vec<Arc<ConcurrencyExperiment>> {
        self.indexes
            .iter()
            .flat_map(|i| i.targeting(namespace, deployment))
            .filter_map(|name| {
                let key = ObjectRef::new(&name).within(namespace);
                self.experiments.iter().find_map(|s| s.get(&key))
            })
            .collect()
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub settings: Settings,
    pub caches: Caches,
    /// Consecutive failures per experiment (`namespace/name`), for the error backoff.
    pub failures: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// Prometheus clients reused across analyses.
    pub prometheus: PrometheusClients,
    /// Where stored transitions are told (sends nothing unless configured).
    pub notifier: Notifier,
    /// Namespaces seen being deleted (asked only while an experiment is being deleted).
    pub namespaces: super::observe::namespaces::TerminatingNamespaces,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, settings: Settings, caches: Caches) -> Self {
        let reporter = Reporter {
            controller: settings.field_manager.clone(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            prometheus: PrometheusClients::new(settings.prometheus.clone()),
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            settings,
            caches,
            failures: Default::default(),
            notifier: Notifier::default(),
            namespaces: Default::default(),
        }
    }

    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// Records one more failure for `key` and returns the delay before the next attempt.
    pub fn backoff_after_failure(&self, key: &str) -> Duration {
        let mut failures = match self.failures.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let factor = 1u32 << (*n - 1).min(16);
        self.settings
            .error_backoff
            .saturating_mul(factor)
            .min(self.settings.max_error_backoff)
    }

    /// A successful reconcile resets the backoff.
    pub fn clear_failures(&self, key: &str) {
        let mut failures = match self.failures.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        failures.remove(key);
    }
}

/// Resolves once the store has its first full list; `false` if its writer is gone.
///
/// kube's `Store::wait_until_ready` waits on a oneshot channel that keeps only the last
/// waiter's waker, and the controller's runner waits on the same store: a second waiter may
/// never be woken. Re-polling on a short timer sidesteps that (the ready state is remembered).
pub(crate) async fn synced<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(500), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_elapsed) => continue,
        }
    }
}
