//! The capacity model's standard-metrics fallback against the exact GVL counters, on real
//! `gvl-sim` servers (Puma 1×4 model, real CPU work: `CPU_CLOCK=thread`) under real load,
//! scraped by a real Prometheus.
//!
//! Off-cluster there is no cAdvisor, so gvl-sim's own `process_cpu_seconds_total`
//! (getrusage: every thread of the one process) stands in for the container's CPU, set as
//! `metrics.cpuUsage`. Each load mix is analysed twice at the same instant: once with the GVL
//! counters (the operator's first choice), once with their names pointed at series that do
//! not exist — as on an app with yabeda or prometheus_exporter only — so the operator falls
//! back by itself. The table printed (`--nocapture`) is the one in
//! docs/benchmarks/capacity-model.md; `server-images/gvl-sim/bench/fallback-model` runs it
//! longer, with a busier mix.
//!
//! Needs the `gvl-sim` binary: `cargo build -p gvl-sim` (found next to this test's target
//! directory) or `GVL_SIM_BIN`.

#[allow(dead_code)]
#[path = "prometheus_analysis/gvlsim.rs"]
mod gvlsim;
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use concurrency_operator::analysis::{analyse, AnalysisContext, AnalysisOutcome};
use concurrency_operator::api::{
    CapacitySource, ConcurrencyExperimentSpec, RenderedServer, ServerKind, VariantCapacity,
};
use concurrency_operator::prometheus::PrometheusClient;
use gvlsim::Proc;
use harness::{start_prometheus, wait_for_data};

const NAMESPACE: &str = "shop";
const THREADS: u32 = 4;

/// One load mix: CPU and I/O milliseconds per request at `rate` req/s.
struct Mix {
    deployment: &'static str,
    cpu_ms: f64,
    io_ms: f64,
    rate: u32,
    /// The rate in the longer bench run (`FALLBACK_WINDOW_SECS`).
    bench_rate: u32,
    /// Only in the longer bench run (`FALLBACK_WINDOW_SECS`): too busy for CI's shared cores.
    bench_only: bool,
}

const MIXES: [Mix; 4] = [
    Mix {
        deployment: "cpuheavy",
        cpu_ms: 16.0,
        io_ms: 4.0,
        rate: 8,
        bench_rate: 15,
        bench_only: false,
    },
    Mix {
        deployment: "half",
        cpu_ms: 10.0,
        io_ms: 10.0,
        rate: 10,
        bench_rate: 20,
        bench_only: false,
    },
    Mix {
        deployment: "ioheavy",
        cpu_ms: 2.0,
        io_ms: 18.0,
        rate: 20,
        bench_rate: 30,
        bench_only: false,
    },
    // Half CPU at 70% of the GVL: threads queue for it, which the fallback counts as I/O.
    Mix {
        deployment: "halfbusy",
        cpu_ms: 10.0,
        io_ms: 10.0,
        rate: 70,
        bench_rate: 70,
        bench_only: true,
    },
];

fn start_server(mix: &Mix) -> (Proc, SocketAddr) {
    gvlsim::try_start_server(&[
        ("SERVER", "puma".into()),
        ("WEB_CONCURRENCY", "1".into()),
        ("RAILS_MAX_THREADS", THREADS.to_string()),
        ("CPU_MS", mix.cpu_ms.to_string()),
        ("IO_MS", mix.io_ms.to_string()),
        // Real CPU: the spin ends when the thread has used cpu_ms of CPU time, so the process'
        // CPU is real work and the GVL counters' running time is wall time holding the GVL.
        ("CPU_CLOCK", "thread".into()),
    ])
    .unwrap_or_else(|line| panic!("gvl-sim did not start: {line:?}"))
}

/// The spec; `fallback` points the GVL counters at series no exporter writes.
fn spec(url: &str, window_secs: u64, fallback: bool) -> ConcurrencyExperimentSpec {
    let counters = if fallback {
        "runningSeconds: none_running_seconds_total, ioWaitSeconds: none_io_wait_seconds_total, \
         gvlWaitSeconds: none_gvl_wait_seconds_total, "
    } else {
        ""
    };
    serde_yaml::from_str(&format!(
        r#"
targetRef: {{name: app}}
container: web
candidate: {{server: puma, workers: 1, threads: {THREADS}}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: {window_secs}s
  minRequests: 10
  metrics: {{{counters}cpuUsage: process_cpu_seconds_total}}
  checks:
    - {{metric: headroom, min: "0%"}}
"#
    ))
    .unwrap()
}

/// The mix's pods as both variants: every figure is the mix's own.
fn context(mix: &Mix, now: jiff::Timestamp) -> AnalysisContext {
    AnalysisContext {
        namespace: NAMESPACE.into(),
        container: "web".into(),
        baseline_deployment: mix.deployment.into(),
        candidate_deployment: mix.deployment.into(),
        stage_index: 0,
        stage_started_at: None,
        weight: 50,
        now,
        baseline_config: Some(RenderedServer {
            server: ServerKind::Puma,
            workers: Some(1),
            threads: Some(THREADS as i32),
            ..RenderedServer::default()
        }),
        baseline_cpu_limit: None,
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}

fn candidate(o: &AnalysisOutcome) -> VariantCapacity {
    o.record
        .capacity
        .as_ref()
        .and_then(|m| m.candidate.clone())
        .unwrap_or_else(|| panic!("no capacity measured: {:#?}", o.record))
}

/// What one mix gave through each source.
struct Compared {
    exact: VariantCapacity,
    fallback: VariantCapacity,
    exact_p: f64,
    fallback_p: f64,
    exact_threads: i32,
    fallback_threads: i32,
}

fn ms(v: Option<f64>) -> f64 {
    v.map_or(f64::NAN, |v| v * 1000.0)
}

fn table(rows: &[(&Mix, Compared)], bench: bool) -> String {
    let mut out = String::from(
        "| mix | cpu ms | io ms | req/s | CPU/req exact | CPU/req fallback | I/O/req exact | I/O/req fallback | p exact | p fallback | threads exact | threads fallback | capacity exact | capacity fallback |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for (mix, c) in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {} | {} | {:.1} | {:.1} |\n",
            mix.deployment,
            mix.cpu_ms,
            mix.io_ms,
            if bench { mix.bench_rate } else { mix.rate },
            ms(c.exact.cpu_per_request),
            ms(c.fallback.cpu_per_request),
            ms(c.exact.io_per_request),
            ms(c.fallback.io_per_request),
            c.exact_p,
            c.fallback_p,
            c.exact_threads,
            c.fallback_threads,
            c.exact.capacity_per_pod.unwrap_or(f64::NAN),
            c.fallback.capacity_per_pod.unwrap_or(f64::NAN),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_metrics_fallback_tracks_the_gvl_counters_on_gvl_sim() {
    let bench_secs = std::env::var("FALLBACK_WINDOW_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let window_secs = bench_secs.unwrap_or(8);
    // `FALLBACK_MIXES=cpuheavy,half`: only these (the bench runs one at a time).
    let only = std::env::var("FALLBACK_MIXES").ok();
    let mixes: Vec<&Mix> = MIXES
        .iter()
        .filter(|m| bench_secs.is_some() || !m.bench_only)
        .filter(|m| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|x| x == m.deployment))
        })
        .collect();
    assert!(!mixes.is_empty(), "FALLBACK_MIXES={only:?} names no mix");
    let servers: Vec<(Proc, SocketAddr)> = mixes.iter().map(|m| start_server(m)).collect();
    let pods: Vec<String> = mixes
        .iter()
        .map(|m| format!("{}-7d9c5b6f4b-x2k9q", m.deployment))
        .collect();
    let targets: Vec<(&str, SocketAddr)> = pods
        .iter()
        .zip(&servers)
        .map(|(p, (_, addr))| (p.as_str(), *addr))
        .collect();
    let mut prom = start_prometheus(NAMESPACE, &targets);
    let load_secs = window_secs + 12;
    let _loads: Vec<Proc> = mixes
        .iter()
        .zip(&servers)
        .map(|(m, (_, addr))| {
            let rate = if bench_secs.is_some() {
                m.bench_rate
            } else {
                m.rate
            };
            gvlsim::start_load(*addr, rate, load_secs, 8)
        })
        .collect();
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    // A full window of load: the first samples are from before it started (and
    // `wait_for_data` gives up after 30 s, shorter than the bench's window).
    tokio::time::sleep(Duration::from_secs(2 + window_secs.saturating_sub(8))).await;
    wait_for_data(&mut prom, &client, targets.len(), window_secs).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let now = jiff::Timestamp::now();
    let mut rows = Vec::new();
    for mix in mixes {
        let ctx = context(mix, now);
        let none = BTreeMap::new();
        let exact = analyse(
            &client,
            &spec(&prom.url, window_secs, false),
            &ctx,
            &[],
            &none,
        )
        .await;
        let fallback = analyse(
            &client,
            &spec(&prom.url, window_secs, true),
            &ctx,
            &[],
            &none,
        )
        .await;
        let (e, f) = (candidate(&exact), candidate(&fallback));
        assert_eq!(e.source, Some(CapacitySource::GvlCounters), "{e:?}");
        assert_eq!(f.source, Some(CapacitySource::StandardMetrics), "{f:?}");
        let (er, fr) = (
            exact.recommendation.clone().expect("exact I/O share"),
            fallback.recommendation.clone().expect("fallback I/O share"),
        );
        assert_eq!(er.source, Some(CapacitySource::GvlCounters));
        assert_eq!(fr.source, Some(CapacitySource::StandardMetrics));
        // The headroom check says which it used.
        let reason = fallback.record.checks[0].reason.clone().unwrap_or_default();
        assert!(reason.contains("standard metrics"), "{reason}");
        rows.push((
            mix,
            Compared {
                exact: e,
                fallback: f,
                exact_p: er.io_ratio,
                fallback_p: fr.io_ratio,
                exact_threads: er.threads,
                fallback_threads: fr.threads,
            },
        ));
    }
    println!("{}", table(&rows, bench_secs.is_some()));

    for (mix, c) in &rows {
        let name = mix.deployment;
        let (ec, fc) = (ms(c.exact.cpu_per_request), ms(c.fallback.cpu_per_request));
        let (ei, fi) = (ms(c.exact.io_per_request), ms(c.fallback.io_per_request));
        // The process' CPU is the spin (cpu_ms of thread CPU) plus the server's own work; the
        // counters' running time is the wall time of the same spin. Loose bounds: a shared
        // machine stretches the wall time, never the CPU time.
        assert!(
            fc >= mix.cpu_ms * 0.8 && fc <= mix.cpu_ms * 1.5 + 1.0,
            "{name}: fallback CPU {fc} ms for {} ms of work",
            mix.cpu_ms
        );
        assert!(ec >= mix.cpu_ms * 0.8, "{name}: exact CPU {ec} ms");
        // Wall − CPU holds the I/O, what the counters call GVL wait and the time the OS ran
        // something else (which the counters count as running): never below the I/O, and CPU
        // plus I/O is the request's wall time either way.
        assert!(
            fi >= ei * 0.8 - 1.0,
            "{name}: fallback I/O {fi} ms below the counters' {ei} ms"
        );
        assert!(
            fc + fi >= (ec + ei) * 0.9 - 1.0,
            "{name}: fallback wall {} ms below the counters' running + I/O {} ms",
            fc + fi,
            ec + ei
        );
        // p itself is not bounded here: on a busy machine the two differ most (the table).
        assert!(
            (0.0..=1.0).contains(&c.fallback_p),
            "{name}: p {}",
            c.fallback_p
        );
    }
    // Nothing here compares p between the mixes: on a busy machine GVL wait (counted as
    // I/O by the fallback) can turn a CPU-heavy mix into an "I/O-heavy" one — the table shows
    // it, docs/benchmarks/capacity-model.md has the numbers.
}
