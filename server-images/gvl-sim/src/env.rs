//! What reading the environment needs everywhere: the server kind, the configuration error,
//! and a bounded number from a variable. Kept apart from `config` so that `memory` (whose spec
//! `config` holds) reads its variables without a circle between the two.

use std::str::FromStr;

/// Which Ruby concurrency model to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Threaded: a fixed pool of OS threads per worker sharing one GVL.
    Puma,
    /// Fiber scheduler: one cooperative event loop per worker.
    Falcon,
}

impl ServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Puma => "puma",
            ServerKind::Falcon => "falcon",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("{var}={value:?} is not a number")]
    NotANumber { var: &'static str, value: String },
    #[error("{var}={value} is out of range: {reason}")]
    OutOfRange {
        var: &'static str,
        value: String,
        reason: &'static str,
    },
    #[error("SERVER={0:?} is unknown: use puma or falcon")]
    UnknownServer(String),
    #[error("{0} is not valid unicode")]
    NotUnicode(&'static str),
    #[error(
        "WORKER_MEMORY_MB and THREAD_MEMORY_MB add up to {total_mb} MiB for {workers} workers \
         x {threads} pool threads, over the {limit_mb} MiB limit"
    )]
    MemoryTotal {
        total_mb: u64,
        workers: usize,
        threads: usize,
        limit_mb: u64,
    },
}

impl ConfigError {
    pub fn category(&self) -> &'static str {
        match self {
            ConfigError::NotANumber { .. } | ConfigError::NotUnicode(_) => "config_parse",
            ConfigError::OutOfRange { .. } | ConfigError::MemoryTotal { .. } => "config_range",
            ConfigError::UnknownServer(_) => "config_server",
        }
    }
}

/// Parses a number from `var` within [min, max]; unset (or empty) gives `default`.
pub(crate) fn number<T>(
    lookup: &dyn Fn(&'static str) -> Result<Option<String>, ConfigError>,
    var: &'static str,
    default: T,
    min: T,
    max: T,
    reason: &'static str,
) -> Result<T, ConfigError>
where
    T: FromStr + PartialOrd + Copy,
{
    let Some(raw) = lookup(var)? else {
        return Ok(default);
    };
    let raw = raw.trim().to_string();
    if raw.is_empty() {
        return Ok(default);
    }
    let value: T = raw.parse().map_err(|_| ConfigError::NotANumber {
        var,
        value: raw.clone(),
    })?;
    // `!(a <= b)` also rejects NaN for floats.
    if !(value >= min && value <= max) {
        return Err(ConfigError::OutOfRange {
            var,
            value: raw,
            reason,
        });
    }
    Ok(value)
}
