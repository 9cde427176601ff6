//! Server configuration from the environment, shared with the Ruby reference app
//! (`SERVER`, `WEB_CONCURRENCY`, `RAILS_MAX_THREADS`, `PORT`, `CPU_MS`, `IO_MS`, `IO_CALLS`)
//! plus gvl-sim's fault injection. Parsing is a pure function of a variable lookup so every
//! error case is a plain unit test.

use crate::env::number;
pub use crate::env::{ConfigError, ServerKind};
use crate::memory::MemorySpec;

/// How CPU work is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// The thread's own CPU time: a fixed amount of work, slower on a loaded machine (Ruby).
    Thread,
    /// Wall time holding the GVL: exact shares on a shared machine (benchmarks).
    Wall,
}

/// The work one request does. Times are milliseconds before jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkSpec {
    pub cpu_ms: f64,
    pub io_ms: f64,
    /// The I/O time is split into this many waits, with CPU slices between them.
    pub io_calls: u32,
    /// Short DB-like waits of `db_ms` each (falcon: under the `DB_POOL` semaphore).
    pub db_ms: f64,
    pub db_calls: u32,
    /// Each of CPU and I/O time is scaled by a uniform factor in [1 - jitter, 1 + jitter].
    pub jitter: f64,
    pub cpu_clock: CpuClock,
}

/// Fault injection, all off by default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    pub error_rate: f64,
    pub extra_latency_ms: f64,
    pub memory_growth_kb_per_request: u64,
    pub memory_growth_kb_per_minute: u64,
    pub slow_start_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    pub server: ServerKind,
    pub workers: usize,
    /// Threads per worker (puma); falcon ignores it.
    pub threads: usize,
    pub port: u16,
    /// Also serve `/metrics` and `/healthz` on this port (the Ruby app's `METRICS_PORT`).
    pub metrics_port: Option<u16>,
    pub work: WorkSpec,
    /// Falcon: at most this many concurrent I/O waits per worker (the seed's `Async::Semaphore`).
    pub db_pool: Option<usize>,
    /// Simulated resident memory (`WORKER_MEMORY_MB`, `THREAD_MEMORY_MB`).
    pub memory: MemorySpec,
    pub faults: Faults,
}

impl ServeConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|var| match std::env::var(var) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode(var)),
        })
    }

    /// Parses from any lookup (tests pass a map).
    pub fn from_lookup(
        lookup: &dyn Fn(&'static str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let server = match lookup("SERVER")?.as_deref().map(str::trim) {
            None | Some("") | Some("puma") => ServerKind::Puma,
            Some("falcon") => ServerKind::Falcon,
            Some(other) => return Err(ConfigError::UnknownServer(other.to_string())),
        };
        let workers = number(lookup, "WEB_CONCURRENCY", 1, 1, 64, "1..=64 workers")?;
        // Puma reads PUMA_MAX_THREADS before the Rails-generated config's RAILS_MAX_THREADS.
        let threads = match number(lookup, "PUMA_MAX_THREADS", 0, 1, 1024, "1..=1024 threads")? {
            0 => number(lookup, "RAILS_MAX_THREADS", 5, 1, 1024, "1..=1024 threads")?,
            n => n,
        };
        let port = number(lookup, "PORT", 3000u16, 0, u16::MAX, "0..=65535")?;
        let metrics_port = match number(lookup, "METRICS_PORT", 0u16, 1, u16::MAX, "1..=65535")? {
            0 => None,
            p => Some(p),
        };
        let work = WorkSpec {
            cpu_ms: number(lookup, "CPU_MS", 5.0, 0.0, 60_000.0, "0..=60000 ms")?,
            io_ms: number(lookup, "IO_MS", 20.0, 0.0, 600_000.0, "0..=600000 ms")?,
            io_calls: number(lookup, "IO_CALLS", 1, 1, 1000, "1..=1000 waits")?,
            db_ms: number(lookup, "DB_MS", 0.0, 0.0, 60_000.0, "0..=60000 ms")?,
            db_calls: number(lookup, "DB_CALLS", 0, 0, 1000, "0..=1000 waits")?,
            jitter: number(lookup, "JITTER", 0.0, 0.0, 1.0, "a fraction 0..=1")?,
            cpu_clock: match lookup("CPU_CLOCK")?.as_deref().map(str::trim) {
                None | Some("") | Some("thread") => CpuClock::Thread,
                Some("wall") => CpuClock::Wall,
                Some(other) => {
                    return Err(ConfigError::OutOfRange {
                        var: "CPU_CLOCK",
                        value: other.to_string(),
                        reason: "use thread or wall",
                    })
                }
            },
        };
        // DB_CONCURRENCY is the Ruby reference app's name for the same limit.
        let db_pool = match number(lookup, "DB_POOL", 0usize, 0, 100_000, "0 (off) or more")? {
            0 => match number(lookup, "DB_CONCURRENCY", 0, 0, 100_000, "0 (off) or more")? {
                0 => None,
                n => Some(n),
            },
            n => Some(n),
        };
        let memory = MemorySpec::from_lookup(lookup, server, workers, threads)?;
        let faults = Faults {
            error_rate: number(lookup, "ERROR_RATE", 0.0, 0.0, 1.0, "a fraction 0..=1")?,
            extra_latency_ms: number(
                lookup,
                "EXTRA_LATENCY_MS",
                0.0,
                0.0,
                600_000.0,
                "0..=600000 ms",
            )?,
            memory_growth_kb_per_request: number(
                lookup,
                "MEMORY_GROWTH_KB_PER_REQUEST",
                0,
                0,
                1 << 20,
                "0..=1048576 KiB",
            )?,
            memory_growth_kb_per_minute: number(
                lookup,
                "MEMORY_GROWTH_KB_PER_MINUTE",
                0,
                0,
                1 << 22,
                "0..=4194304 KiB",
            )?,
            slow_start_s: number(lookup, "SLOW_START_S", 0.0, 0.0, 3600.0, "0..=3600 s")?,
        };
        Ok(ServeConfig {
            server,
            workers,
            threads,
            port,
            metrics_port,
            work,
            db_pool,
            memory,
            faults,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&'static str, &str)]) -> Result<ServeConfig, ConfigError> {
        let map: HashMap<&'static str, String> =
            vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        ServeConfig::from_lookup(&|var| Ok(map.get(var).cloned()))
    }

    #[test]
    fn defaults_are_a_small_puma() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.server, ServerKind::Puma);
        assert_eq!((c.workers, c.threads, c.port), (1, 5, 3000));
        assert_eq!(c.work.io_calls, 1);
        assert_eq!(c.db_pool, None);
        assert_eq!(c.metrics_port, None);
        assert_eq!(c.faults, Faults::default());
        assert_eq!(c.memory, MemorySpec::default());
    }

    #[test]
    fn reads_every_variable() {
        let c = parse(&[
            ("SERVER", "falcon"),
            ("WEB_CONCURRENCY", "4"),
            ("RAILS_MAX_THREADS", "20"),
            ("PORT", "8080"),
            ("CPU_MS", "2.5"),
            ("IO_MS", "500"),
            ("IO_CALLS", "3"),
            ("DB_MS", "2"),
            ("DB_CALLS", "5"),
            ("JITTER", "0.1"),
            ("CPU_CLOCK", "wall"),
            ("DB_POOL", "20"),
            ("ERROR_RATE", "0.05"),
            ("EXTRA_LATENCY_MS", "30"),
            ("MEMORY_GROWTH_KB_PER_REQUEST", "4"),
            ("MEMORY_GROWTH_KB_PER_MINUTE", "1024"),
            ("SLOW_START_S", "1.5"),
            ("WORKER_MEMORY_MB", "60"),
            ("THREAD_MEMORY_MB", "4"),
        ])
        .unwrap();
        assert_eq!(c.server, ServerKind::Falcon);
        assert_eq!((c.workers, c.threads, c.port), (4, 20, 8080));
        assert_eq!(
            c.work,
            WorkSpec {
                cpu_ms: 2.5,
                io_ms: 500.0,
                io_calls: 3,
                db_ms: 2.0,
                db_calls: 5,
                jitter: 0.1,
                cpu_clock: CpuClock::Wall,
            }
        );
        assert_eq!(c.db_pool, Some(20));
        assert_eq!(c.faults.error_rate, 0.05);
        assert_eq!(c.faults.extra_latency_ms, 30.0);
        assert_eq!(c.faults.memory_growth_kb_per_request, 4);
        assert_eq!(c.faults.memory_growth_kb_per_minute, 1024);
        assert_eq!(c.faults.slow_start_s, 1.5);
        assert_eq!((c.memory.worker_mb, c.memory.thread_mb), (60, 4));
    }

    #[test]
    fn ruby_app_spellings() {
        let c = parse(&[
            ("RAILS_MAX_THREADS", "5"),
            ("PUMA_MAX_THREADS", "3"),
            ("DB_CONCURRENCY", "10"),
            ("METRICS_PORT", "9394"),
        ])
        .unwrap();
        assert_eq!(
            (c.threads, c.db_pool, c.metrics_port),
            (3, Some(10), Some(9394))
        );
        let c = parse(&[("DB_POOL", "4"), ("DB_CONCURRENCY", "10")]).unwrap();
        assert_eq!(c.db_pool, Some(4));
        assert!(parse(&[("PUMA_MAX_THREADS", "0")]).is_err());
    }

    #[test]
    fn unknown_server_is_refused_by_name() {
        let err = parse(&[("SERVER", "unicorn")]).unwrap_err();
        assert_eq!(err, ConfigError::UnknownServer("unicorn".into()));
        assert!(err.to_string().contains("SERVER"));
        assert_eq!(err.category(), "config_server");
    }

    #[test]
    fn negative_times_name_the_variable() {
        for var in ["CPU_MS", "IO_MS", "EXTRA_LATENCY_MS", "SLOW_START_S"] {
            let err = parse(&[(var, "-1")]).unwrap_err();
            assert!(
                matches!(err, ConfigError::OutOfRange { var: v, .. } if v == var),
                "{var}: {err}"
            );
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }

    #[test]
    fn non_numeric_values_name_the_variable() {
        for var in [
            "WEB_CONCURRENCY",
            "RAILS_MAX_THREADS",
            "PORT",
            "IO_MS",
            "DB_POOL",
        ] {
            let err = parse(&[(var, "lots")]).unwrap_err();
            assert_eq!(
                err,
                ConfigError::NotANumber {
                    var,
                    value: "lots".into()
                }
            );
            assert_eq!(err.category(), "config_parse");
        }
    }

    #[test]
    fn ranges_are_enforced() {
        assert!(parse(&[("WEB_CONCURRENCY", "0")]).is_err());
        assert!(parse(&[("RAILS_MAX_THREADS", "0")]).is_err());
        assert!(parse(&[("IO_CALLS", "0")]).is_err());
        assert!(parse(&[("JITTER", "1.5")]).is_err());
        assert!(parse(&[("ERROR_RATE", "2")]).is_err());
        assert!(parse(&[("CPU_MS", "NaN")]).is_err());
        assert!(parse(&[("PORT", "70000")]).is_err());
        assert!(parse(&[("PORT", "0")]).is_ok());
        let err = parse(&[("CPU_CLOCK", "sundial")]).unwrap_err();
        assert!(err.to_string().starts_with("CPU_CLOCK="), "{err}");
    }

    #[test]
    fn empty_values_mean_unset() {
        let c = parse(&[("SERVER", ""), ("RAILS_MAX_THREADS", " ")]).unwrap();
        assert_eq!((c.server, c.threads), (ServerKind::Puma, 5));
    }
}
