//! The operator's own observability and process plumbing: logs, `/metrics`, health and
//! readiness, and the shutdown signal.

pub mod logging;
pub mod metrics;
pub mod server;
pub mod shutdown;
pub mod tls;

pub use logging::{init_logging, LogFormat, LoggingError};
pub use metrics::Metrics;
pub use server::{Readiness, ServerError, TelemetryServer};
pub use shutdown::cancel_on_signal;
pub use tls::install_crypto_provider;
pub use tokio_util::sync::CancellationToken;
