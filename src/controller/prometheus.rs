//! The Prometheus clients the controller keeps, per resolved provider and timeout: each holds
//! an HTTP connection pool (and its TLS setup) and its slots of queries in flight, which a new
//! client per analysis would build and throw away every interval — and with them the bound
//! on the queries one Prometheus can hold.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;

use crate::api::ConcurrencyExperiment;
use crate::prometheus::{
    PrometheusClient, PrometheusError, Provider, ProviderError, ProvidersConfig,
};
use crate::telemetry::Metrics;

/// Distinct Prometheus endpoints kept; experiments rarely use more than one or two.
pub const MAX_PROMETHEUS_CLIENTS: usize = 16;

/// The operator's Prometheus configuration and its clients by (provider, timeout), least
/// recently used first; the oldest is dropped beyond [`MAX_PROMETHEUS_CLIENTS`], so URLs from
/// long-deleted experiments do not pile up.
#[derive(Default)]
pub struct PrometheusClients {
    config: ProvidersConfig,
    clients: Mutex<Vec<((Provider, Duration), PrometheusClient)>>,
}

impl PrometheusClients {
    pub fn new(config: ProvidersConfig) -> Self {
        Self {
            config,
            clients: Mutex::default(),
        }
    }

    /// The provider `exp` queries, or why it cannot (a spec error naming the field: the
    /// experiment is `Invalid`).
    pub fn resolve(&self, exp: &ConcurrencyExperiment) -> Result<Provider, ProviderError> {
        let namespace = exp.namespace().unwrap_or_default();
        self.config
            .resolve(&exp.spec.analysis.prometheus, &namespace)
    }

    /// The client for a bare `url`.
    pub fn client(
        &self,
        url: &str,
        timeout: Duration,
        metrics: &Metrics,
    ) -> Result<PrometheusClient, PrometheusError> {
        self.client_for(&Provider::from_url(url), timeout, metrics)
    }

    /// The client for `provider`, made on first use; its queries are timed into
    /// `concurrency_prometheus_query_duration_seconds`. A provider that cannot be used is not
    /// kept.
    pub fn client_for(
        &self,
        provider: &Provider,
        timeout: Duration,
        metrics: &Metrics,
    ) -> Result<PrometheusClient, PrometheusError> {
        let mut clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let key = (provider.clone(), timeout);
        if let Some(i) = clients.iter().position(|(k, _)| *k == key) {
            let entry = clients.remove(i);
            let client = entry.1.clone();
            clients.push(entry);
            return Ok(client);
        }
        let metrics = metrics.clone();
        let client = PrometheusClient::for_provider(provider, timeout)?
            .timed(Arc::new(move |d| metrics.observe_prometheus_query(d)));
        if clients.len() >= MAX_PROMETHEUS_CLIENTS {
            clients.remove(0);
        }
        clients.push((key, client.clone()));
        Ok(client)
    }

    /// The URLs kept (credentials redacted), least recently used first.
    pub fn urls(&self) -> Vec<String> {
        let clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        clients.iter().map(|(_, c)| c.url().to_string()).collect()
    }
}
