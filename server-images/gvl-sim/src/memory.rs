//! Simulated resident memory: what a booted Ruby app holds for its whole life. A Rails worker
//! process is ~100 MiB or more before its first request, and every Puma thread adds its stack
//! and its share of per-thread allocations; without this a gvl-sim pod is 1–2 MiB, and the
//! operator's memory check compares noise.
//!
//! `WORKER_MEMORY_MB` is held once per worker (puma and falcon), `THREAD_MEMORY_MB` once per
//! Puma pool thread. Falcon has no thread pool — one event loop per worker, requests are
//! fibers — so it holds only the worker memory. Both default to 0 (no simulated memory).

use crate::env::{number, ConfigError, ServerKind};

/// The most simulated memory one server may hold, over all workers and threads.
pub const LIMIT_MB: u64 = 4096;

const MIB: usize = 1024 * 1024;

/// The configured simulated memory, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemorySpec {
    /// Held by each worker (`WORKER_MEMORY_MB`).
    pub worker_mb: u64,
    /// Held by each Puma pool thread (`THREAD_MEMORY_MB`); falcon holds none.
    pub thread_mb: u64,
}

impl MemorySpec {
    /// Reads `WORKER_MEMORY_MB` and `THREAD_MEMORY_MB` and checks that the total for this
    /// server, `workers` and `threads` stays within [`LIMIT_MB`].
    pub fn from_lookup(
        lookup: &dyn Fn(&'static str) -> Result<Option<String>, ConfigError>,
        server: ServerKind,
        workers: usize,
        threads: usize,
    ) -> Result<Self, ConfigError> {
        let spec = MemorySpec {
            worker_mb: number(lookup, "WORKER_MEMORY_MB", 0, 0, LIMIT_MB, "0..=4096 MiB")?,
            thread_mb: number(lookup, "THREAD_MEMORY_MB", 0, 0, LIMIT_MB, "0..=4096 MiB")?,
        };
        let total_mb = spec.total_mb(server, workers, threads);
        if total_mb > LIMIT_MB {
            return Err(ConfigError::MemoryTotal {
                total_mb,
                workers,
                threads: spec.held_threads(server, threads),
                limit_mb: LIMIT_MB,
            });
        }
        Ok(spec)
    }

    /// Threads per worker that hold `thread_mb`: the Puma pool; falcon has none.
    pub fn held_threads(&self, server: ServerKind, threads: usize) -> usize {
        match server {
            ServerKind::Puma => threads,
            ServerKind::Falcon => 0,
        }
    }

    /// workers × worker_mb + workers × threads × thread_mb (saturating: the limit check
    /// must see an overflow as too large, not wrap).
    pub fn total_mb(&self, server: ServerKind, workers: usize, threads: usize) -> u64 {
        let workers = workers as u64;
        let threads = self.held_threads(server, threads) as u64;
        workers.saturating_mul(self.worker_mb).saturating_add(
            workers
                .saturating_mul(threads)
                .saturating_mul(self.thread_mb),
        )
    }
}

/// Memory that is really resident: every page written (non-zero, so not left to the kernel's
/// zero page or calloc's untouched mappings) and kept until the holder is dropped.
pub struct Resident(Vec<u8>);

impl Resident {
    pub fn hold(mb: u64) -> Resident {
        let bytes = usize::try_from(mb)
            .unwrap_or(usize::MAX)
            .saturating_mul(MIB);
        // `vec![x; n]` with x != 0 writes every byte, so every page is faulted in now.
        let block = vec![0x5Au8; bytes];
        // The block is never read; this stops the allocation being optimised away.
        Resident(std::hint::black_box(block))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(
        vars: &[(&'static str, &str)],
        server: ServerKind,
        workers: usize,
        threads: usize,
    ) -> Result<MemorySpec, ConfigError> {
        let map: HashMap<&'static str, String> =
            vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        MemorySpec::from_lookup(&|var| Ok(map.get(var).cloned()), server, workers, threads)
    }

    #[test]
    fn off_by_default() {
        let m = parse(&[], ServerKind::Puma, 4, 5).unwrap();
        assert_eq!(m, MemorySpec::default());
        assert_eq!(m.total_mb(ServerKind::Puma, 4, 5), 0);
    }

    #[test]
    fn puma_holds_per_worker_and_per_thread() {
        let vars = [("WORKER_MEMORY_MB", "60"), ("THREAD_MEMORY_MB", "4")];
        let m = parse(&vars, ServerKind::Puma, 2, 5).unwrap();
        assert_eq!(
            m,
            MemorySpec {
                worker_mb: 60,
                thread_mb: 4
            }
        );
        assert_eq!(m.total_mb(ServerKind::Puma, 2, 5), 2 * 60 + 2 * 5 * 4);
        assert_eq!(m.total_mb(ServerKind::Puma, 1, 1), 64);
    }

    #[test]
    fn falcon_holds_only_worker_memory() {
        let vars = [("WORKER_MEMORY_MB", "60"), ("THREAD_MEMORY_MB", "4")];
        let m = parse(&vars, ServerKind::Falcon, 3, 5).unwrap();
        assert_eq!(m.total_mb(ServerKind::Falcon, 3, 5), 180);
        assert_eq!(m.held_threads(ServerKind::Falcon, 5), 0);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for var in ["WORKER_MEMORY_MB", "THREAD_MEMORY_MB"] {
            let err = parse(&[(var, "lots")], ServerKind::Puma, 1, 1).unwrap_err();
            assert_eq!(
                err,
                ConfigError::NotANumber {
                    var,
                    value: "lots".into()
                }
            );
            for bad in ["-1", "4097", "1.5"] {
                let err = parse(&[(var, bad)], ServerKind::Puma, 1, 1).unwrap_err();
                assert!(err.to_string().starts_with(var), "{var}={bad}: {err}");
            }
        }
    }

    #[test]
    fn the_total_is_limited() {
        // 4 × 1000 + 4 × 5 × 10 = 4200 MiB: each variable is in range, the sum is not.
        let vars = [("WORKER_MEMORY_MB", "1000"), ("THREAD_MEMORY_MB", "10")];
        let err = parse(&vars, ServerKind::Puma, 4, 5).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MemoryTotal {
                total_mb: 4200,
                workers: 4,
                threads: 5,
                limit_mb: LIMIT_MB,
            }
        );
        assert_eq!(err.category(), "config_range");
        let msg = err.to_string();
        assert!(
            msg.contains("WORKER_MEMORY_MB") && msg.contains("THREAD_MEMORY_MB"),
            "{msg}"
        );
        // The same variables fit a falcon server, which has no per-thread memory.
        assert!(parse(&vars, ServerKind::Falcon, 4, 5).is_ok());
        // Exactly at the limit is allowed.
        let at = [("WORKER_MEMORY_MB", "4096")];
        assert!(parse(&at, ServerKind::Puma, 1, 5).is_ok());
        assert!(parse(&at, ServerKind::Puma, 2, 5).is_err());
    }

    #[test]
    fn resident_memory_is_written() {
        let r = Resident::hold(2);
        assert_eq!(r.len(), 2 * MIB);
        // One byte per 4 KiB page: all were written with the fill value.
        assert!(r.0.iter().step_by(4096).all(|&b| b == 0x5A));
        assert!(Resident::hold(0).is_empty());
    }
}
