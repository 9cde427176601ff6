//! Where an analysis reads its numbers: one instant query, one value. The operator asks
//! Prometheus (`crate::prometheus`); unit tests answer from a table. This is the seam between
//! the pure analysis and its I/O.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;

/// One instant query, one number. A check's query must yield one value: `Ok(None)` is "no
/// data" (an empty vector), several series are an error rather than silently summed.
pub trait MetricSource: Sync {
    /// Evaluates `promql` at `at`.
    fn query_value(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> impl Future<Output = Result<Option<f64>, PrometheusError>> + Send;

    /// Evaluates `promql` at `at`: each series' `label` and value (a histogram's buckets by
    /// `le`, for the sequential judge). A source that answers single values only says so.
    fn query_by_label(
        &self,
        promql: &str,
        at: Timestamp,
        label: &str,
    ) -> impl Future<Output = Result<Vec<(String, f64)>, PrometheusError>> + Send {
        let _ = (promql, at, label);
        async {
            Err(PrometheusError::NotOneValue(
                "a vector, from a source that answers single values only".into(),
            ))
        }
    }
}

/// Why a metric source gave no value. Named after Prometheus, the one real source: these are
/// the ways a Prometheus query fails, and each is Inconclusive, never a Pass.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error("Prometheus URL {url:?} is not usable: {message}")]
    InvalidUrl { url: String, message: String },
    #[error("cannot set up the HTTP client for Prometheus at {url:?}: {message}")]
    ClientSetup { url: String, message: String },
    #[error("Prometheus is unreachable: {0}")]
    Unreachable(String),
    #[error("Prometheus did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Prometheus rejected the query: {0}")]
    BadQuery(String),
    #[error("Prometheus failed to evaluate the query: {0}")]
    Server(String),
    #[error("the query returned {0}; a check needs exactly one value (wrap it in sum(), max() or avg())")]
    NotOneValue(String),
    #[error(
        "Prometheus answered more than {limit} bytes, the most the operator reads: a check's \
         query must return one series (wrap it in sum(), max() or avg())"
    )]
    ResponseTooLarge { limit: usize },
    #[error(
        "Prometheus answered HTTP {status} redirecting to {location}; redirects are not \
         followed: set the URL to where Prometheus answers"
    )]
    Redirected { status: u16, location: String },
    #[error("Prometheus refused the credentials (HTTP {status}): {message}")]
    Unauthorized { status: u16, message: String },
    #[error("Prometheus credentials: {0}")]
    Credentials(String),
}

impl PrometheusError {
    /// Short category for Events, metric labels and check reasons.
    pub fn category(&self) -> &'static str {
        match self {
            PrometheusError::InvalidUrl { .. } => "PrometheusURLInvalid",
            PrometheusError::ClientSetup { .. } => "PrometheusClientSetup",
            PrometheusError::Unreachable(_) => "PrometheusUnreachable",
            PrometheusError::Timeout(_) => "PrometheusTimeout",
            PrometheusError::BadQuery(_) => "QueryRejected",
            PrometheusError::Server(_) => "PrometheusError",
            PrometheusError::NotOneValue(_) => "QueryNotOneValue",
            PrometheusError::ResponseTooLarge { .. } => "PrometheusResponseTooLarge",
            PrometheusError::Redirected { .. } => "PrometheusRedirect",
            PrometheusError::Unauthorized { .. } => "PrometheusUnauthorized",
            PrometheusError::Credentials(_) => "PrometheusCredentials",
        }
    }
}
