//! What the recorder runs: pairs of gvl-sim configs side by side, A/A and with known
//! regressions, each variant's environment spelled out.

/// The baseline every pair starts from: Puma 1×4 spending 2 ms of real CPU (holding the GVL)
/// and 20 ms waiting on I/O per request, ±50 %, 0.2 % errors, 40 MiB per worker.
pub fn base() -> Vec<(&'static str, String)> {
    [
        ("SERVER", "puma"),
        ("WEB_CONCURRENCY", "1"),
        ("RAILS_MAX_THREADS", "4"),
        ("CPU_MS", "2"),
        ("IO_MS", "20"),
        ("IO_CALLS", "2"),
        ("JITTER", "0.5"),
        ("ERROR_RATE", "0.002"),
        ("WORKER_MEMORY_MB", "40"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect()
}

/// Queue-time pairs: I/O-bound Puma 1×2 near its capacity, so the baseline itself queues.
pub fn queueing() -> Vec<(&'static str, String)> {
    with(
        base(),
        &[
            ("RAILS_MAX_THREADS", "2"),
            ("CPU_MS", "0.5"),
            ("IO_MS", "32"),
        ],
    )
}

pub fn with(
    mut env: Vec<(&'static str, String)>,
    changes: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    for (k, v) in changes {
        env.retain(|(key, _)| key != k);
        env.push((k, v.to_string()));
    }
    env
}

pub struct Pair {
    pub name: &'static str,
    pub regression: Option<&'static str>,
    /// Requests per second per variant, when not `--rate`.
    pub rate: Option<u32>,
    pub baseline: Vec<(&'static str, String)>,
    pub candidate: Vec<(&'static str, String)>,
}

pub fn pairs() -> Vec<Pair> {
    let same = |name| Pair {
        name,
        regression: None,
        rate: None,
        baseline: base(),
        candidate: base(),
    };
    let queue = |name, regression, io| Pair {
        name,
        regression: Some(regression),
        rate: Some(50),
        baseline: queueing(),
        candidate: with(queueing(), &[("IO_MS", io)]),
    };
    let changed = |name, regression, changes: &[(&'static str, &str)]| Pair {
        name,
        regression: Some(regression),
        rate: None,
        baseline: base(),
        candidate: with(base(), changes),
    };
    vec![
        same("aa-1"),
        same("aa-2"),
        same("aa-3"),
        Pair {
            name: "aa-queueing",
            regression: None,
            rate: Some(50),
            baseline: queueing(),
            candidate: queueing(),
        },
        queue(
            "queue-io-35ms",
            "I/O 32 → 35 ms at 50 rps on 2 threads (utilization 81 → 89 %): queue time up",
            "35",
        ),
        queue(
            "queue-io-38ms",
            "I/O 32 → 38 ms at 50 rps on 2 threads (utilization 81 → 96 %): near what it carries",
            "38",
        ),
        changed(
            "latency-plus-40ms",
            "40 ms more per request (a slow dependency)",
            &[("EXTRA_LATENCY_MS", "40")],
        ),
        changed(
            "errors-x2",
            "errors 0.2 % → 0.4 %",
            &[("ERROR_RATE", "0.004")],
        ),
        changed("errors-x5", "errors 0.2 % → 1 %", &[("ERROR_RATE", "0.01")]),
        changed(
            "memory-plus-30",
            "worker memory 40 → 52 MiB (+30 %)",
            &[("WORKER_MEMORY_MB", "52")],
        ),
    ]
}
