//! The analysis' I/O: the Prometheus client that answers `analysis::MetricSource`, with its
//! timeouts, size cap, error classification, credentials and TLS set-up, and the provider
//! configuration that says which Prometheus an experiment may ask with which credentials.
//! Everything it computes with is in `analysis`; this module only asks Prometheus.

mod client;
mod config;
mod endpoint;
pub mod provider;
mod response;
mod tls;
mod transport;

pub use client::{
    client_for, PrometheusClient, QueryTimer, DEFAULT_TIMEOUT, MAX_IN_FLIGHT, MAX_RESPONSE_BYTES,
};
pub use provider::{Provider, ProviderError, ProvidersConfig};
// The error is the metric source's, re-exported where a caller of the client looks for it.
pub use crate::analysis::PrometheusError;

#[cfg(test)]
mod tests;
