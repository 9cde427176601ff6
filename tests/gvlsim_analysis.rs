//! Analysis of real `gvl-sim` servers (GVL-bound Puma model) under real load from its own
//! load generator, scraped by a real Prometheus. The candidate has a slow dependency
//! (`EXTRA_LATENCY_MS`), so its latency must fail while everything else passes, and the I/O
//! share — hence the recommendation — must come out of the measured counters.
//!
//! Needs the `gvl-sim` binary: `cargo build -p gvl-sim` (found next to this test's target
//! directory) or `GVL_SIM_BIN`.

#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use concurrency_operator::analysis::{
    analyse, recommended_threads, AnalysisContext, PrometheusClient,
};
use concurrency_operator::api::{ConcurrencyExperimentSpec, Verdict};
use harness::{start_prometheus, wait_for_data};
use jiff::Timestamp;

const NAMESPACE: &str = "shop";
const WINDOW_SECS: u64 = 6;
const RATE: u32 = 20;
const CPU_MS: f64 = 5.0;
const IO_MS: f64 = 6.0;
const EXTRA_MS: f64 = 40.0;

/// Kills the child on drop, also when an assertion fails.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn gvl_sim_binary() -> PathBuf {
    if let Ok(p) = std::env::var("GVL_SIM_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/<this test> → target/<profile>/gvl-sim
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("gvl-sim");
    assert!(
        bin.is_file(),
        "gvl-sim binary missing at {}: run `cargo build -p gvl-sim` first (or set GVL_SIM_BIN)",
        bin.display()
    );
    bin
}

/// Starts `gvl-sim serve` on a free loopback port and returns it with its address.
fn start_server(extra_latency_ms: f64) -> (Proc, SocketAddr) {
    let mut child = Command::new(gvl_sim_binary())
        .args(["serve", "--bind", "127.0.0.1"])
        .env("SERVER", "puma")
        .env("WEB_CONCURRENCY", "1")
        .env("RAILS_MAX_THREADS", "4")
        .env("CPU_MS", CPU_MS.to_string())
        .env("IO_MS", IO_MS.to_string())
        // Hold the GVL for wall time: exact CPU/I/O shares on a shared machine.
        .env("CPU_CLOCK", "wall")
        .env("EXTRA_LATENCY_MS", extra_latency_ms.to_string())
        .env("PORT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("gvl-sim did not report its address: {line:?}"));
    // Keep draining so a chatty server never blocks on a full pipe.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    (Proc(child), addr)
}

fn start_load(addr: SocketAddr, secs: u64) -> Proc {
    Proc(
        Command::new(gvl_sim_binary())
            .args(["load", "--url", &format!("http://{addr}/")])
            .args([
                "--rate",
                &RATE.to_string(),
                "--duration",
                &format!("{secs}s"),
            ])
            .args(["--connections", "8"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
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

    let ctx = AnalysisContext {
        namespace: NAMESPACE.into(),
        container: "web".into(),
        baseline_deployment: "storefront".into(),
        candidate_deployment: "storefront-candidate".into(),
        stage_index: 1,
        weight: 50,
        now: Timestamp::now(),
    };
    let o = analyse(&client, &spec(&prom.url), &ctx, &[]).await;
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
    assert!(started.elapsed() < Duration::from_secs(60));
}
