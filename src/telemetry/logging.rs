//! Logging through `tracing`: human text for a terminal, JSON lines for a cluster's log
//! pipeline. `RUST_LOG`, when set, wins over the configured filter so an operator can be made
//! chatty without editing its Deployment arguments.

use std::io::{IsTerminal, Write};

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid log filter {filter:?} (from {source_name}): {message}")]
    Filter {
        filter: String,
        source_name: &'static str,
        message: String,
    },
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

impl LoggingError {
    pub fn category(&self) -> &'static str {
        match self {
            LoggingError::Filter { .. } => "LogFilterInvalid",
            LoggingError::AlreadyInstalled => "LoggingAlreadyInstalled",
        }
    }
}

/// Installs the global subscriber, writing to stderr. Call once, early in `main`.
pub fn init_logging(format: LogFormat, filter: &str) -> Result<(), LoggingError> {
    let env = std::env::var("RUST_LOG").ok();
    let filter = env_filter(env.as_deref(), filter)?;
    // Colours only for a person at a terminal; log collectors would store the escape codes.
    let ansi = std::io::stderr().is_terminal();
    let subscriber = build_subscriber(format, filter, ansi, std::io::stderr);
    tracing::subscriber::set_global_default(subscriber).map_err(|_| LoggingError::AlreadyInstalled)
}

/// `RUST_LOG` if set and non-empty, else the configured filter; both must parse.
pub fn env_filter(rust_log: Option<&str>, configured: &str) -> Result<EnvFilter, LoggingError> {
    let (filter, source_name) = match rust_log.map(str::trim) {
        Some(env) if !env.is_empty() => (env, "RUST_LOG"),
        _ => (configured, "--log-filter"),
    };
    EnvFilter::builder()
        .parse(filter)
        .map_err(|err| LoggingError::Filter {
            filter: filter.to_owned(),
            source_name,
            message: err.to_string(),
        })
}

/// The subscriber `init_logging` installs, with any writer (tests capture into a buffer).
pub fn build_subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    ansi: bool,
    writer: W,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi && format == LogFormat::Text)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_target(true).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .finish(),
        ),
    }
}

/// A `MakeWriter` over a shared buffer, for tests of log output.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    pub fn contents(&self) -> String {
        let buf = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut buf = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
