//! `kubectl concurrency recommend`'s measurement against a real Prometheus (Debian package
//! `prometheus`) scraping loopback exporters labelled as Kubernetes pods: the operator's query
//! templates give the I/O share, CPU and I/O seconds per request and the busiest pod's rate,
//! and only the target Deployment's pods are counted.

// Shared with the other real-Prometheus tests; this one uses only part of it.
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use concurrency_operator::api::{MetricNames, RenderedServer, ServerKind};
use concurrency_operator::kubectl::recommend::{measure, queries, report, ReportSettings, Target};
use concurrency_operator::prometheus::PrometheusClient;
use harness::{serve, start_prometheus, wait_for_data, Pod};
use jiff::Timestamp;

const WINDOW_SECS: u64 = 6;

/// 200 ms per request: 52% I/O, 10% GVL wait, so 76 ms running (CPU) and 104 ms I/O.
fn pod(name: &'static str, rps: f64) -> Pod {
    Pod {
        name,
        rps,
        error_share: 0.0,
        cumulative: [0.1, 0.3, 0.7, 1.0, 1.0, 1.0],
        mean_latency: 0.2,
        gvl_share: 0.10,
        io_share: 0.52,
        memory: 200.0 * 1024.0 * 1024.0,
    }
}

fn target(deployment: &str) -> Target {
    Target {
        deployment: deployment.into(),
        namespace: "shop".into(),
        container: "web".into(),
        config: RenderedServer {
            server: ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..Default::default()
        },
        replicas: 2,
        ready: 2,
        cpu_limit: None,
    }
}

fn close(v: Option<f64>, expected: f64, tol: f64, what: &str) {
    let v = v.unwrap_or_else(|| panic!("{what}: no value"));
    assert!((v - expected).abs() <= tol, "{what}: {v} vs {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recommend_measures_a_deployment_from_a_real_prometheus() {
    let started = Instant::now();
    let pods = vec![
        pod("storefront-7d9c5b6f4b-x2k9q", 20.0),
        pod("storefront-7d9c5b6f4b-h7kzq", 10.0),
        // Another Deployment whose name extends the target's: busier, all CPU — never counted.
        Pod {
            io_share: 0.0,
            gvl_share: 0.0,
            ..pod("storefront-x-6c8d7f9b5-q4w2z", 500.0)
        },
    ];
    let count = pods.len();
    let mut targets = Vec::new();
    for p in pods {
        let name = p.name;
        targets.push((name, serve(p, started).await));
    }
    let mut prom = start_prometheus("shop", &targets);
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, count, WINDOW_SECS).await;

    let window = Duration::from_secs(WINDOW_SECS);
    let t = target("storefront");
    let qs = queries(&t, &MetricNames::default(), window).unwrap();
    let m = measure(&client, &qs, Timestamp::now()).await.unwrap();
    // Counters grow linearly, so ratios are exact whatever the scrape jitter.
    close(m.io_share, 0.52, 1e-6, "I/O share");
    close(m.cpu, 0.076, 1e-6, "CPU per request");
    close(m.io, 0.104, 1e-6, "I/O per request");
    // A rate over a few scrapes: within 10%.
    close(m.busiest_pod_rate, 20.0, 2.0, "busiest pod rate");

    let settings = ReportSettings {
        prometheus: prom.url.clone(),
        window,
        min_gain: 0.05,
        async_above: 0.95,
    };
    let (text, missing) = report(&t, &m, &qs, &settings);
    assert!(missing.is_empty(), "{missing:?}\n{text}");
    assert!(text.contains("  I/O share p      52.0%"), "{text}");
    assert!(
        text.contains("      4    1.64x          +7.1%  <- recommended"),
        "{text}"
    );
    // 2 workers × min(6 / 180 ms, 1 / 76 ms) = 26.3 req/s; 20 req/s leaves about a quarter.
    let now = text
        .lines()
        .find(|l| l.starts_with("puma    6 "))
        .unwrap_or_else(|| panic!("no 6-thread row in\n{text}"));
    assert!(now.contains("13.2 req/s  26.3 req/s  GVL"), "{now}");
    assert!(now.ends_with("← now"), "{now}");

    // A Deployment without pods in Prometheus: every query named as returning nothing.
    let qs = queries(&target("checkout"), &MetricNames::default(), window).unwrap();
    let m = measure(&client, &qs, Timestamp::now()).await.unwrap();
    let (text, missing) = report(&target("checkout"), &m, &qs, &settings);
    assert_eq!(
        missing,
        [
            "I/O share",
            "CPU per request",
            "I/O per request",
            "busiest pod rate",
            "container CPU per request",
            "wall time per request"
        ]
    );
    assert!(text.contains("\n  I/O share: sum(rate(ruby_io_wait_seconds_total{namespace=\"shop\",pod=~\"^checkout-["), "{text}");
}
