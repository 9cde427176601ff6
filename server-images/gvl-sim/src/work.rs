//! What one request does: a sequence of CPU slices and I/O waits, built from the configured
//! `WorkSpec`, per-request query-string overrides, jitter and injected latency.

use crate::config::{ConfigError, WorkSpec};
use crate::env::number;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Busy CPU work that needs the GVL (puma) or blocks the event loop (falcon).
    Cpu(Duration),
    /// A wait that releases the GVL (an HTTP call, `sleep`).
    Io(Duration),
    /// A short DB-like wait: releases the GVL; in falcon it needs a `DB_POOL` slot.
    Db(Duration),
}

/// Applies `?cpu_ms=&io_ms=&io_calls=&db_ms=&db_calls=&jitter=` to the configured spec. Errors name the
/// parameter; unknown parameters are ignored, as Rack apps ignore them.
pub fn with_overrides(base: &WorkSpec, query: Option<&str>) -> Result<WorkSpec, ConfigError> {
    let params: HashMap<String, String> = query
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv.to_string(), String::new()),
        })
        .collect();
    let lookup = |var: &'static str| Ok(params.get(var).cloned());
    Ok(WorkSpec {
        cpu_ms: number(
            &lookup,
            "cpu_ms",
            base.cpu_ms,
            0.0,
            60_000.0,
            "0..=60000 ms",
        )?,
        io_ms: number(
            &lookup,
            "io_ms",
            base.io_ms,
            0.0,
            600_000.0,
            "0..=600000 ms",
        )?,
        io_calls: number(
            &lookup,
            "io_calls",
            base.io_calls,
            1,
            1000,
            "1..=1000 waits",
        )?,
        db_ms: number(&lookup, "db_ms", base.db_ms, 0.0, 60_000.0, "0..=60000 ms")?,
        db_calls: number(
            &lookup,
            "db_calls",
            base.db_calls,
            0,
            1000,
            "0..=1000 waits",
        )?,
        jitter: number(&lookup, "jitter", base.jitter, 0.0, 1.0, "a fraction 0..=1")?,
        cpu_clock: base.cpu_clock,
    })
}

fn jittered(ms: f64, jitter: f64, rng: &mut fastrand::Rng) -> f64 {
    if jitter == 0.0 {
        return ms;
    }
    ms * (1.0 + jitter * (2.0 * rng.f64() - 1.0))
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// The steps of one request: the DB waits, then the I/O waits (`io_ms` split into
/// `io_calls`), with the CPU split into equal slices around them (some work, a query, …, an
/// HTTP call, render), then the injected latency as one more wait (a slow dependency).
/// Zero-length steps are left out.
pub fn plan(spec: &WorkSpec, extra_latency_ms: f64, rng: &mut fastrand::Rng) -> Vec<Step> {
    let cpu = jittered(spec.cpu_ms, spec.jitter, rng);
    let io = jittered(spec.io_ms, spec.jitter, rng);
    let db = jittered(spec.db_ms, spec.jitter, rng);
    let io_calls = if io > 0.0 { spec.io_calls.max(1) } else { 0 };
    let db_calls = if db > 0.0 { spec.db_calls } else { 0 };
    let io_slice = if io_calls > 0 {
        io / f64::from(io_calls)
    } else {
        0.0
    };
    let waits = (0..db_calls)
        .map(|_| Step::Db(millis(db)))
        .chain((0..io_calls).map(|_| Step::Io(millis(io_slice))));
    let cpu_slice = cpu / f64::from(db_calls + io_calls + 1);
    let mut steps = Vec::with_capacity(2 * (db_calls + io_calls) as usize + 2);
    for wait in waits {
        if cpu_slice > 0.0 {
            steps.push(Step::Cpu(millis(cpu_slice)));
        }
        steps.push(wait);
    }
    if cpu_slice > 0.0 {
        steps.push(Step::Cpu(millis(cpu_slice)));
    }
    if extra_latency_ms > 0.0 {
        steps.push(Step::Io(millis(extra_latency_ms)));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CpuClock;

    fn spec(cpu_ms: f64, io_ms: f64, io_calls: u32) -> WorkSpec {
        WorkSpec {
            cpu_ms,
            io_ms,
            io_calls,
            db_ms: 0.0,
            db_calls: 0,
            jitter: 0.0,
            cpu_clock: CpuClock::Thread,
        }
    }

    fn totals(steps: &[Step]) -> (f64, f64) {
        steps.iter().fold((0.0, 0.0), |(c, i), s| match s {
            Step::Cpu(d) => (c + d.as_secs_f64() * 1000.0, i),
            Step::Io(d) | Step::Db(d) => (c, i + d.as_secs_f64() * 1000.0),
        })
    }

    #[test]
    fn interleaves_cpu_slices_around_io_waits() {
        let steps = plan(&spec(30.0, 60.0, 2), 0.0, &mut fastrand::Rng::with_seed(1));
        let ms = Duration::from_millis;
        assert_eq!(
            steps,
            vec![
                Step::Cpu(ms(10)),
                Step::Io(ms(30)),
                Step::Cpu(ms(10)),
                Step::Io(ms(30)),
                Step::Cpu(ms(10))
            ]
        );
    }

    #[test]
    fn db_waits_come_first_and_share_the_cpu_slices() {
        let s = WorkSpec {
            db_ms: 2.0,
            db_calls: 2,
            ..spec(4.0, 10.0, 1)
        };
        let ms = Duration::from_millis;
        assert_eq!(
            plan(&s, 0.0, &mut fastrand::Rng::with_seed(1)),
            vec![
                Step::Cpu(ms(1)),
                Step::Db(ms(2)),
                Step::Cpu(ms(1)),
                Step::Db(ms(2)),
                Step::Cpu(ms(1)),
                Step::Io(ms(10)),
                Step::Cpu(ms(1)),
            ]
        );
    }

    #[test]
    fn pure_io_and_pure_cpu() {
        let rng = &mut fastrand::Rng::with_seed(1);
        assert_eq!(
            plan(&spec(0.0, 500.0, 1), 0.0, rng),
            vec![Step::Io(Duration::from_millis(500))]
        );
        assert_eq!(
            plan(&spec(7.0, 0.0, 3), 0.0, rng),
            vec![Step::Cpu(Duration::from_millis(7))]
        );
        assert_eq!(plan(&spec(0.0, 0.0, 1), 0.0, rng), vec![]);
    }

    #[test]
    fn injected_latency_is_a_trailing_wait() {
        let steps = plan(&spec(0.0, 0.0, 1), 40.0, &mut fastrand::Rng::with_seed(1));
        assert_eq!(steps, vec![Step::Io(Duration::from_millis(40))]);
    }

    #[test]
    fn jitter_stays_within_its_band() {
        let mut rng = fastrand::Rng::with_seed(7);
        let s = WorkSpec {
            jitter: 0.2,
            ..spec(100.0, 100.0, 4)
        };
        let mut seen_different = false;
        for _ in 0..200 {
            let (cpu, io) = totals(&plan(&s, 0.0, &mut rng));
            assert!((80.0 - 1e-6..=120.0 + 1e-6).contains(&cpu), "{cpu}");
            assert!((80.0 - 1e-6..=120.0 + 1e-6).contains(&io), "{io}");
            seen_different |= (cpu - 100.0).abs() > 1.0;
        }
        assert!(seen_different);
    }

    #[test]
    fn query_overrides_replace_the_configured_work() {
        let base = spec(5.0, 20.0, 1);
        let s = with_overrides(&base, Some("cpu_ms=1.5&io_ms=500&x=1&flag")).unwrap();
        assert_eq!(s, spec(1.5, 500.0, 1));
        assert_eq!(with_overrides(&base, None).unwrap(), base);
    }

    #[test]
    fn bad_query_values_name_the_parameter() {
        let base = spec(5.0, 20.0, 1);
        let err = with_overrides(&base, Some("io_ms=-3")).unwrap_err();
        assert!(err.to_string().starts_with("io_ms="), "{err}");
        let err = with_overrides(&base, Some("cpu_ms=abc")).unwrap_err();
        assert!(err.to_string().starts_with("cpu_ms="), "{err}");
    }
}
