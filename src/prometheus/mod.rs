//! The analysis' I/O: the Prometheus client that answers `analysis::MetricSource`, with its
//! timeouts, error classification and TLS set-up. Everything it computes with is in
//! `analysis`; this module only asks Prometheus.

mod client;

pub use client::{client_for, PrometheusClient, QueryTimer, DEFAULT_TIMEOUT};
// The error is the metric source's, re-exported where a caller of the client looks for it.
pub use crate::analysis::PrometheusError;

#[cfg(test)]
mod tests;
