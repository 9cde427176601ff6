//! The demo's blind spot, with real `gvl-sim` servers, its load generator and a real
//! Prometheus: a candidate with too few threads for the load (Puma 1×1 at 20 req/s of 62 ms
//! requests, capacity ~16 req/s) has the same server-side latency as the baseline (1×4) —
//! the wait for the thread is outside the request-duration histogram — so `latency` passes,
//! while `queueTime` (from the load generator's `X-Request-Start`) fails it — and so do
//! Puma's own stats, which need no header: `backlog` and `threadUtilization` (no preset: the
//! reference images' `puma_*` gauges, which gvl-sim writes).
//!
//! Needs the `gvl-sim` binary: `cargo build -p gvl-sim` (found next to this test's target
//! directory) or `GVL_SIM_BIN`.

#[path = "prometheus_analysis/gvlsim.rs"]
mod gvlsim;
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use concurrency_operator::analysis::analyse;
use concurrency_operator::api::{ConcurrencyExperimentSpec, Verdict};
use concurrency_operator::prometheus::PrometheusClient;
use gvlsim::Proc;
use harness::{free_port, start_prometheus, wait_for_data};

const NAMESPACE: &str = "shop";
const WINDOW_SECS: u64 = 6;
const RATE: u32 = 20;
const IO_MS: f64 = 62.0;

/// Puma, one worker with `threads` threads, 62 ms of I/O per request: (process, app
/// address, metrics address). `/metrics` is also on its own port, so scrapes never wait
/// behind a saturated pool.
fn start_server(threads: u32) -> (Proc, SocketAddr, SocketAddr) {
    // The free port can be taken before gvl-sim binds it: then another one.
    let mut last = String::new();
    for _ in 0..5 {
        let metrics_port = free_port();
        match gvlsim::try_start_server(&[
            ("SERVER", "puma".into()),
            ("WEB_CONCURRENCY", "1".into()),
            ("RAILS_MAX_THREADS", threads.to_string()),
            ("CPU_MS", "0".into()),
            ("IO_MS", IO_MS.to_string()),
            ("METRICS_PORT", metrics_port.to_string()),
        ]) {
            Ok((proc, addr)) => return (proc, addr, SocketAddr::new(addr.ip(), metrics_port)),
            Err(line) if line.contains("Address already in use") => last = line,
            Err(line) => panic!("gvl-sim did not start: {line:?}"),
        }
    }
    panic!("gvl-sim did not start on 5 free ports: {last:?}")
}

fn spec(url: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        r#"
targetRef: {{name: storefront}}
container: web
candidate: {{server: puma, workers: 1, threads: 1}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: {WINDOW_SECS}s
  minRequests: 50
  checks:
    - {{metric: latency, quantile: 0.9, maxIncrease: "50%"}}
    - {{metric: queueTime, quantile: 0.9, max: 50ms, maxIncrease: "50%"}}
    - {{metric: backlog, max: 2}}
    - {{metric: threadUtilization, max: "90%"}}
"#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_threads_pass_latency_but_fail_queue_time() {
    let (_baseline, baseline_addr, baseline_metrics) = start_server(4);
    let (_candidate, candidate_addr, candidate_metrics) = start_server(1);
    let targets = [
        ("storefront-7d9c5b6f4b-x2k9q", baseline_metrics),
        ("storefront-candidate-5f4d8c9b7-b2c4d", candidate_metrics),
    ];
    let mut prom = start_prometheus(NAMESPACE, &targets);
    // Enough connections that requests wait at the server (where they would wait behind a
    // load balancer), not for a free load connection, which would hide them from the stamp.
    let load_secs = 30;
    let _loads = [
        gvlsim::start_load(baseline_addr, RATE, load_secs, 200),
        gvlsim::start_load(candidate_addr, RATE, load_secs, 200),
    ];
    let loaded = std::time::Instant::now();
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, targets.len(), WINDOW_SECS).await;
    // The window must lie inside the load, past its first seconds: a full window of scrapes
    // can start with the load's first second, when the candidate's one thread is still idle
    // between the first arrivals (a cold CI run read threadUtilization 5/6 = 83 % from one
    // such scrape, against the > 95 % asserted below).
    let settled = Duration::from_secs(WINDOW_SECS + 3);
    if let Some(left) = settled.checked_sub(loaded.elapsed()) {
        tokio::time::sleep(left).await;
    }
    // The load is a process of its own: on a busy 2-core machine it can start seconds after it
    // was spawned, and a clean CI run read 5/6 again with the sleep above alone. So wait until
    // every scrape of the analysis window saw a request queued at the candidate (the load in
    // force, not yet what the checks conclude from it).
    let loaded_window = format!(
        r#"min_over_time(puma_backlog{{namespace="{NAMESPACE}",pod="{}"}}[{WINDOW_SECS}s])"#,
        targets[1].0
    );
    loop {
        let queued = client
            .query_value(&loaded_window, jiff::Timestamp::now())
            .await
            .ok()
            .flatten();
        if queued.is_some_and(|q| q > 0.0) {
            break;
        }
        assert!(
            loaded.elapsed() < Duration::from_secs(load_secs - WINDOW_SECS),
            "the candidate never had a request queued at every scrape of a {WINDOW_SECS} s window \
             (last {queued:?}): the load did not reach it"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let ctx = gvlsim::storefront_context(NAMESPACE);
    let o = analyse(&client, &spec(&prom.url), &ctx, &[], &Default::default()).await;
    let r = &o.record;
    let by_name = |n: &str| r.checks.iter().find(|c| c.name == n).unwrap();
    let (latency, queue) = (by_name("latency"), by_name("queueTime"));
    eprintln!(
        "latency p90: baseline {:?}, candidate {:?}; queue time p90: baseline {:?}, candidate {:?}; requests {:?} / {:?}",
        latency.baseline, latency.candidate, queue.baseline, queue.candidate,
        r.baseline_requests, r.candidate_requests
    );
    assert_eq!(r.verdict, Verdict::Fail, "{r:#?}");
    // Which checks failed is asserted per check below (with their values); the list itself
    // once came out otherwise on a machine loaded by the e2e suite, without its values.
    let reason = r.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("failed: ") && reason.contains("queueTime"),
        "{r:#?}"
    );
    // The server-side latency cannot tell them apart: both ~62 ms of work.
    assert_eq!(latency.verdict, Verdict::Pass, "{latency:#?}");
    // The candidate's backlog grows by ~4 req/s: seconds of queueing, the baseline ~none.
    assert!(queue.candidate.unwrap() > 0.5, "{queue:#?}");
    assert!(queue.baseline.unwrap() < 0.05, "{queue:#?}");
    assert!(
        queue
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("above max 50ms"),
        "{queue:#?}"
    );
    // ~4 req/s more than one thread serves pile up in the candidate's backlog; the baseline's
    // 4 threads keep up (20 req/s × 62 ms ≈ 1.2 busy threads of 4).
    let (backlog, threads) = (by_name("backlog"), by_name("threadUtilization"));
    eprintln!("backlog {backlog:?}; thread utilization {threads:?}");
    assert!(backlog.candidate.unwrap() > 2.0, "{backlog:#?}");
    assert_eq!(backlog.verdict, Verdict::Fail, "{backlog:#?}");
    assert!(backlog.baseline.unwrap() < 0.5, "{backlog:#?}");
    assert!(threads.candidate.unwrap() > 0.95, "{threads:#?}");
    assert_eq!(threads.verdict, Verdict::Fail, "{threads:#?}");
    let base = threads.baseline.unwrap();
    assert!(base > 0.1 && base < 0.6, "{threads:#?}");
}
