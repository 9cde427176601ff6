//! Analysis of real `gvl-sim` servers (GVL-bound Puma model) under real load from its own
//! load generator, scraped by a real Prometheus. The candidate has a slow dependency
//! (`EXTRA_LATENCY_MS`), so its latency must fail while everything else passes, and the I/O
//! share — hence the recommendation — must come out of the measured counters.
//!
//! Needs the `gvl-sim` binary: `cargo build -p gvl-sim` (found next to this test's target
//! directory) or `GVL_SIM_BIN`.

#[path = "prometheus_analysis/gvlsim.rs"]
mod gvlsim;
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use concurrency_operator::analysis::{analyse, predict, recommended_threads, PerRequest};
use concurrency_operator::api::{ConcurrencyExperimentSpec, RenderedServer, Verdict};
use concurrency_operator::prometheus::PrometheusClient;
use gvlsim::Proc;
use harness::{start_prometheus, wait_for_data};

const NAMESPACE: &str = "shop";
const WINDOW_SECS: u64 = 6;
const RATE: u32 = 20;
const CPU_MS: f64 = 5.0;
const IO_MS: f64 = 6.0;
const EXTRA_MS: f64 = 40.0;

/// Puma 1×4 with the given slow-dependency delay.
fn start_server(extra_latency_ms: f64) -> (Proc, SocketAddr) {
    gvlsim::try_start_server(&[
        ("SERVER", "puma".into()),
        ("WEB_CONCURRENCY", "1".into()),
        ("RAILS_MAX_THREADS", "4".into()),
        ("CPU_MS", CPU_MS.to_string()),
        ("IO_MS", IO_MS.to_string()),
        // Hold the GVL for wall time: exact CPU/I/O shares on a shared machine.
        ("CPU_CLOCK", "wall".into()),
        ("EXTRA_LATENCY_MS", extra_latency_ms.to_string()),
    ])
    .unwrap_or_else(|line| panic!("gvl-sim did not start: {line:?}"))
}

fn start_load(addr: SocketAddr, secs: u64) -> Proc {
    gvlsim::start_load(addr, RATE, secs, 8)
}

fn spec(url: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        r#"
targetRef: {{name: storefront}}
container: web
candidate: {{server: puma, workers: 1, threads: 4}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: {WINDOW_SECS}s
  minRequests: 50
  metrics: {{memory: process_resident_memory_bytes}}
  checks:
    - {{metric: latency, quantile: 0.9, maxIncrease: "50%"}}
    - {{metric: errorRate, max: "1%"}}
    - {{metric: gvlWait, max: "20%"}}
    - {{metric: memory, maxIncrease: "100%"}}
"#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gvl_sim_candidate_with_a_slow_dependency_fails_latency() {
    let started = Instant::now();
    let (_baseline, baseline_addr) = start_server(0.0);
    let (_candidate, candidate_addr) = start_server(EXTRA_MS);
    let targets = [
        ("storefront-7d9c5b6f4b-x2k9q", baseline_addr),
        ("storefront-candidate-5f4d8c9b7-b2c4d", candidate_addr),
    ];
    let mut prom = start_prometheus(NAMESPACE, &targets);
    let load_secs = 20;
    let _loads = [
        start_load(baseline_addr, load_secs),
        start_load(candidate_addr, load_secs),
    ];
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, targets.len(), WINDOW_SECS).await;

    let ctx = gvlsim::storefront_context(NAMESPACE);
    let o = analyse(&client, &spec(&prom.url), &ctx, &[], &Default::default()).await;
    let r = &o.record;
    assert_eq!(r.verdict, Verdict::Fail, "{r:#?}");
    assert_eq!(r.reason.as_deref(), Some("failed: latency"), "{r:#?}");
    let by_name = |n: &str| r.checks.iter().find(|c| c.name == n).unwrap();
    let latency = by_name("latency");
    let (b, c) = (latency.baseline.unwrap(), latency.candidate.unwrap());
    // Baseline: 11 ms of work; candidate: 40 ms more, whatever the machine's load adds.
    assert!(b >= 0.010 && b < c, "{latency:#?}");
    assert!(c >= 0.050, "{latency:#?}");
    // No 5xx series at all: the error rate is 0, not missing.
    assert_eq!(by_name("errorRate").candidate, Some(0.0), "{r:#?}");
    assert_eq!(by_name("gvlWait").verdict, Verdict::Pass, "{r:#?}");
    assert_eq!(by_name("memory").verdict, Verdict::Pass, "{r:#?}");
    let expected = f64::from(RATE) * WINDOW_SECS as f64;
    for v in [r.baseline_requests, r.candidate_requests] {
        let v = v.unwrap();
        assert!((v - expected).abs() <= expected * 0.3, "{v} vs {expected}");
    }

    // I/O share from the counters of both servers: (6 + 46) / (5 + 6 + 5 + 46) ms without GVL
    // wait; GVL wait only lowers it.
    let rec = o.recommendation.expect("recommendation");
    let ideal = (2.0 * IO_MS + EXTRA_MS) / (2.0 * (CPU_MS + IO_MS) + EXTRA_MS);
    assert!(
        rec.io_ratio <= ideal + 0.02 && rec.io_ratio >= ideal - 0.08,
        "io share {} vs {ideal}",
        rec.io_ratio
    );
    assert_eq!(rec.threads as u32, recommended_threads(rec.io_ratio, 0.05));

    // Capacity from the measured counters: CPU and I/O per request as configured (the wall
    // clock holds the GVL: GVL wait, if any, is in neither), 20 req/s on each one-pod variant.
    let m = r.capacity.as_ref().expect("capacity measured");
    let (b, c) = (m.baseline.as_ref().unwrap(), m.candidate.as_ref().unwrap());
    let ms = |v: Option<f64>| v.unwrap() * 1000.0;
    for (what, v, want) in [
        ("baseline CPU", ms(b.cpu_per_request), CPU_MS),
        ("candidate CPU", ms(c.cpu_per_request), CPU_MS),
        ("baseline I/O", ms(b.io_per_request), IO_MS),
        ("candidate I/O", ms(c.io_per_request), IO_MS + EXTRA_MS),
    ] {
        assert!(
            (v - want).abs() <= want * 0.2 + 1.0,
            "{what}: {v} ms vs {want} ms"
        );
    }
    for v in [b.per_pod_rate, c.per_pod_rate] {
        let v = v.unwrap();
        assert!((v - f64::from(RATE)).abs() <= f64::from(RATE) * 0.3, "{v}");
    }
    let total = m.total_rate.unwrap();
    assert!(
        (total - 2.0 * f64::from(RATE)).abs() <= 2.0 * f64::from(RATE) * 0.3,
        "{total}"
    );
    // The gate's prediction from these inputs: the candidate (Puma 1×4, 5 + 46 ms) alone at
    // 100% on one pod would carry the total rate at about 40 / (4 / 51 ms) ≈ 51% utilization.
    let config = RenderedServer::from(spec(&prom.url).single_candidate());
    let per_request = PerRequest {
        cpu: c.cpu_per_request.unwrap(),
        io: c.io_per_request.unwrap(),
        blocking: 0.0,
    };
    let p = predict(&config, per_request, None, total, 100, 1).unwrap();
    let ideal = 2.0 * f64::from(RATE) * (CPU_MS + IO_MS + EXTRA_MS) / 1000.0 / 4.0;
    assert!(
        (p.utilization - ideal).abs() <= ideal * 0.35,
        "{p:?} vs {ideal}"
    );
    assert!(
        (c.capacity_per_pod.unwrap() - p.capacity.per_pod).abs() < 1e-9,
        "status shows the gate's estimate"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}
