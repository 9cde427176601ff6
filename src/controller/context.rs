//! What every reconcile shares: the API client, the event recorder, metrics and settings.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::Client;

use crate::api::ConcurrencyExperiment;

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
    /// How long to wait before retrying a failed reconcile (doubles per consecutive failure).
    pub error_backoff: Duration,
    /// Longest wait between two failed reconciles.
    pub max_error_backoff: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            field_manager: FIELD_MANAGER.into(),
            prometheus_timeout: Duration::from_secs(10),
            error_backoff: Duration::from_secs(5),
            max_error_backoff: Duration::from_secs(300),
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub settings: Settings,
    /// The controllers' caches of experiments (one per watched namespace, or one for all).
    pub stores: Vec<Store<ConcurrencyExperiment>>,
    /// Consecutive failures per experiment (`namespace/name`), for the error backoff.
    pub failures: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// Prometheus clients reused across analyses.
    pub prometheus: super::analyse::PrometheusClients,
}

impl Context {
    pub fn new(
        client: Client,
        metrics: Metrics,
        settings: Settings,
        stores: Vec<Store<ConcurrencyExperiment>>,
    ) -> Self {
        let reporter = Reporter {
            controller: settings.field_manager.clone(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            settings,
            stores,
            failures: Default::default(),
            prometheus: Default::default(),
        }
    }

    /// Every experiment the controllers know of.
    pub fn experiments(&self) -> Vec<Arc<ConcurrencyExperiment>> {
        self.stores.iter().flat_map(|s| s.state()).collect()
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
