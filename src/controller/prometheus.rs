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

    /// The client `exp` queries through (its resolved provider: URL, credentials, TLS,
    /// headers), and that URL as it may be shown (no credentials). Every query an experiment
    /// makes goes through here — the pre-flight lookup as much as the analyses — so none is
    /// sent without the credentials its provider has. A provider that does not resolve (the
    /// configuration changed under a running experiment) is an error like an unreachable
    /// Prometheus.
    pub fn for_experiment(
        &self,
        exp: &ConcurrencyExperiment,
        timeout: Duration,
        metrics: &Metrics,
    ) -> (Result<PrometheusClient, String>, String) {
        match self.resolve(exp) {
            Ok(provider) => {
                let url = crate::telemetry::redact::url_for_display(&provider.url);
                let client = self
                    .client_for(&provider, timeout, metrics)
                    .map_err(|e| format!("{e} ({})", e.category()));
                (client, url)
            }
            Err(e) => (Err(e.to_string()), "(unresolved)".to_string()),
        }
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
