//! The operator's own observability and process plumbing: logs, `/metrics`, health and
//! readiness, and the shutdown signal.

mod experiment_metrics;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod redact;
pub mod shutdown;
pub mod tls;

pub use experiment_metrics::{keeps_series, FINISHED_RETENTION};
pub use http::{HttpServerError, Readiness, TelemetryServer};
pub use logging::{init_logging, LogFormat, LoggingError};
pub use metrics::Metrics;
pub use shutdown::cancel_on_signal;
pub use tls::install_crypto_provider;
pub use tokio_util::sync::CancellationToken;

#[cfg(test)]
mod tests;
