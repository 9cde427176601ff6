//! The Prometheus clients the controller keeps, per URL and timeout: each holds an HTTP
//! connection pool (and its TLS setup), which a new client per analysis would build and throw
//! away every interval.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::prometheus::{PrometheusClient, PrometheusError};
use crate::telemetry::Metrics;

/// Distinct Prometheus endpoints kept; experiments rarely use more than one or two.
pub const MAX_PROMETHEUS_CLIENTS: usize = 16;

/// Prometheus clients by (URL, timeout), least recently used first; the oldest is dropped
/// beyond [`MAX_PROMETHEUS_CLIENTS`], so URLs from long-deleted experiments do not pile up.
#[derive(Default)]
pub struct PrometheusClients {
    clients: Mutex<Vec<((String, Duration), PrometheusClient)>>,
}

impl PrometheusClients {
    /// The client for `url`, made on first use; its queries are timed into
    /// `concurrency_prometheus_query_duration_seconds`. A URL that cannot be used is not kept.
    pub fn client(
        &self,
        url: &str,
        timeout: Duration,
        metrics: &Metrics,
    ) -> Result<PrometheusClient, PrometheusError> {
        let mut clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let key = (url.to_string(), timeout);
        if let Some(i) = clients.iter().position(|(k, _)| *k == key) {
            let entry = clients.remove(i);
            let client = entry.1.clone();
            clients.push(entry);
            return Ok(client);
        }
        let metrics = metrics.clone();
        let client = PrometheusClient::new(url, timeout)?
            .timed(Arc::new(move |d| metrics.observe_prometheus_query(d)));
        if clients.len() >= MAX_PROMETHEUS_CLIENTS {
            clients.remove(0);
        }
        clients.push((key, client.clone()));
        Ok(client)
    }

    /// The URLs kept, least recently used first.
    pub fn urls(&self) -> Vec<String> {
        let clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        clients.iter().map(|((url, _), _)| url.clone()).collect()
    }
}
