//! Thread-count recommendation from the measured I/O share, by Amdahl's law: with a share p of
//! request time spent outside the GVL (waiting on I/O), n threads per process give
//! S(n) = 1 / ((1 − p) + p / n). The recommendation is the largest n whose step from n − 1
//! still gains at least `minGain`; above `asyncAbove` an async server (Falcon) is advised, with
//! seed 004's worker count per core.

use crate::api::{parse_percent, QuantityError, Recommendation, RecommendationSpec};

/// Beyond this a thread pool is not a sensible answer anyway (p = 1 stops at 21 with 5%).
pub const MAX_THREADS: u32 = 64;

/// Shortest table shown, so the falling gains are visible.
const MIN_TABLE: u32 = 8;

pub fn amdahl_speedup(p: f64, n: u32) -> f64 {
    1.0 / ((1.0 - p) + p / f64::from(n))
}

/// Relative gain of the step from n − 1 to n threads.
fn gain(p: f64, n: u32) -> f64 {
    amdahl_speedup(p, n) / amdahl_speedup(p, n - 1) - 1.0
}

/// The largest n (1..=64) whose step from n − 1 gains at least `min_gain`. Gains fall with n,
/// so this is the last n before the first step that falls short.
pub fn recommended_threads(p: f64, min_gain: f64) -> u32 {
    // Float noise must not drop a step that gains exactly `min_gain`.
    (2..=MAX_THREADS)
        .take_while(|&n| gain(p, n) >= min_gain - 1e-12)
        .last()
        .unwrap_or(1)
}

fn table_len(threads: u32) -> u32 {
    (threads + 2).clamp(MIN_TABLE, MAX_THREADS)
}

/// The most a saturated process can serve relative to one thread: every request holds the GVL
/// for its (1 − p) share, so throughput is capped at 1 / (1 − p) whatever the thread count.
/// Amdahl's S(n) assumes a request's CPU and I/O never overlap other requests' and so stays
/// below this; gvl-sim measures the pool reaching the cap (docs/benchmarks/gvl-sim.md).
pub fn gvl_throughput_ceiling(p: f64) -> f64 {
    1.0 / (1.0 - p)
}

/// From this I/O share on, an app is I/O-bound for seed 004's Falcon sizing: one worker per
/// core; below it CPU is mixed in (templates, serialization) and one worker's fibers would
/// queue behind each other's CPU: two per core.
pub const IO_BOUND: f64 = 0.9;

/// Seed 004's Falcon workers per core for I/O share `p`.
pub fn async_workers_per_core(p: f64) -> i32 {
    if p >= IO_BOUND {
        1
    } else {
        2
    }
}

/// `None` unless 0 ≤ p ≤ 1 (a NaN share means the counters did not move).
pub fn recommend(p: f64, min_gain: f64, async_above: f64) -> Option<Recommendation> {
    if !(0.0..=1.0).contains(&p) {
        return None;
    }
    let threads = recommended_threads(p, min_gain);
    let speedups = (1..=table_len(threads))
        .map(|n| amdahl_speedup(p, n))
        .collect();
    let async_server_advised = p >= async_above;
    let per_core = async_server_advised.then(|| async_workers_per_core(p));
    let next = if threads < MAX_THREADS {
        format!(
            "; thread {} would gain only {}",
            threads + 1,
            percent(gain(p, threads + 1))
        )
    } else {
        String::new()
    };
    let mut message = format!(
        "I/O share {}: {threads} threads per process (speedup {:.2}×{next}, below {})",
        percent(p),
        amdahl_speedup(p, threads),
        percent(min_gain)
    );
    if let Some(n) = per_core {
        let why = if n == 1 { "I/O-bound" } else { "CPU mixed in" };
        message = format!(
            "I/O share {} is at least {}: an async server (Falcon) is advised, {n} worker(s) per \
             CPU core ({why}; seed 004) — judge the switch with minImprovement. For a threaded \
             server, {threads} threads per process (speedup {:.2}×)",
            percent(p),
            percent(async_above),
            amdahl_speedup(p, threads)
        );
    }
    Some(Recommendation {
        io_ratio: p,
        source: None,
        threads: i32::try_from(threads).unwrap_or(i32::MAX),
        async_server_advised,
        async_workers_per_core: per_core,
        speedups,
        message,
    })
}

/// From the spec's strings (`5%`, `95%`).
pub fn recommend_from_spec(
    p: f64,
    spec: &RecommendationSpec,
) -> Result<Option<Recommendation>, QuantityError> {
    let min_gain = parse_percent("spec.analysis.recommendation.minGain", &spec.min_gain)?;
    let async_above = parse_percent("spec.analysis.recommendation.asyncAbove", &spec.async_above)?;
    Ok(recommend(p, min_gain, async_above))
}

fn percent(share: f64) -> String {
    let s = format!("{:.1}", share * 100.0);
    format!("{}%", s.strip_suffix(".0").unwrap_or(&s))
}

/// The whole table, for `concurrency-operator recommend --io-ratio P`.
pub fn recommendation_table(p: f64, min_gain: f64, async_above: f64) -> String {
    let Some(rec) = recommend(p, min_gain, async_above) else {
        return format!("I/O share {p} is not between 0 and 1\n");
    };
    let mut out = format!(
        "I/O share p = {}; Amdahl: S(n) = 1 / ((1 - p) + p / n); minimum gain per thread {}\n",
        percent(p),
        percent(min_gain)
    );
    out.push_str("threads  speedup  gain over n-1\n");
    for (i, s) in rec.speedups.iter().enumerate() {
        let n = i as u32 + 1;
        let step = if n == 1 {
            "-".to_string()
        } else {
            format!("+{}", percent(gain(p, n)))
        };
        let mark = if n as i32 == rec.threads {
            "  <- recommended"
        } else {
            ""
        };
        out.push_str(&format!("{n:>7}  {s:>6.2}x  {step:>13}{mark}\n"));
    }
    out.push_str(&rec.message);
    out.push('\n');
    if p < 1.0 {
        out.push_str(&format!(
            "Under saturation the GVL caps a process at {:.2}x one thread's throughput (1 / (1 - p)); \
             threads beyond that only add GVL wait. Amdahl's S(n) is the conservative estimate.\n",
            gvl_throughput_ceiling(p)
        ));
    }
    out
}
