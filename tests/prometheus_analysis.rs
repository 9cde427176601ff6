//! Analysis against a real Prometheus (Debian package `prometheus`) scraping real HTTP
//! exporters on loopback: one per pod, labelled as Kubernetes service discovery would.
//!
//! Counters grow linearly with wall time at a fixed rate per pod, so every ratio the checks
//! compute (quantile, error rate, GVL share, I/O share) is known exactly whatever the scrape
//! jitter; request counts depend on window coverage and are checked within a tolerance.

#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use concurrency_operator::analysis::{analyse, AnalysisContext};
use concurrency_operator::api::{
    AnalysisRecord, BaselineReference, CapacityBound, CheckResult, ConcurrencyExperimentSpec,
    RenderedServer, ServerKind, Statistical, Verdict,
};
use concurrency_operator::plan::AnalysisOutcome;
use concurrency_operator::prometheus::PrometheusClient;
use harness::{free_port, serve, start_prometheus, wait_for_data, Pod};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const NAMESPACE: &str = "shop";
const INTERVAL_SECS: u64 = 6;
const FAST: [f64; 6] = [0.2, 0.5, 0.9, 1.0, 1.0, 1.0]; // p99 = 0.25 + 0.9·0.25 = 0.475
const SLOW: [f64; 6] = [0.05, 0.2, 0.5, 0.9, 1.0, 1.0]; // p99 = 0.5 + 0.9·0.5 = 0.95
const MI: f64 = 1024.0 * 1024.0;

fn pods() -> Vec<Pod> {
    let pod = |name, cumulative, mean_latency, memory| Pod {
        name,
        rps: 20.0,
        error_share: 0.01,
        cumulative,
        mean_latency,
        gvl_share: 0.10,
        io_share: 0.52,
        memory,
    };
    vec![
        pod("storefront-7d9c5b6f4b-x2k9q", FAST, 0.2, 200.0 * MI),
        pod(
            "storefront-candidate-5f4d8c9b7-b2c4d",
            SLOW,
            0.4,
            210.0 * MI,
        ),
        pod("storefront-good-5f4d8c9b7-h7kzq", FAST, 0.2, 205.0 * MI),
        // Another Deployment whose name extends the target's: must never be counted.
        Pod {
            name: "storefront-x-6c8d7f9b5-q4w2z",
            rps: 500.0,
            error_share: 0.5,
            cumulative: [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            mean_latency: 3.0,
            gvl_share: 0.9,
            io_share: 0.05,
            memory: 2048.0 * MI,
        },
        // Too little traffic to judge.
        Pod {
            rps: 0.5,
            ..pod("storefront-idle-5f4d8c9b7-m9n8p", FAST, 0.2, 200.0 * MI)
        },
    ]
}

fn spec(url: &str, min_requests: i64) -> ConcurrencyExperimentSpec {
    let yaml = format!(
        r#"
targetRef: {{name: storefront}}
container: web
candidate: {{server: puma, workers: 2, threads: 4}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: {INTERVAL_SECS}s
  minRequests: {min_requests}
  checks:
    - {{metric: latency, quantile: 0.99, max: 700ms, maxIncrease: "10%"}}
    - {{metric: memory, maxIncrease: "20%"}}
    - {{metric: gvlWait, max: "15%"}}
    - {{metric: errorRate, max: "2%"}}
    - name: pods
      query: 'count(up{{namespace="{{{{namespace}}}}",pod=~"{{{{pods}}}}"}})'
      min: 1
      max: 1
"#
    );
    serde_yaml::from_str(&yaml).unwrap()
}

fn ctx(candidate: &str) -> AnalysisContext {
    AnalysisContext {
        namespace: NAMESPACE.into(),
        container: "web".into(),
        baseline_deployment: "storefront".into(),
        candidate_deployment: candidate.into(),
        stage_index: 0,
        stage_started_at: None,
        weight: 30,
        now: Timestamp::now(),
        baseline_config: Some(RenderedServer {
            server: ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..Default::default()
        }),
        baseline_cpu_limit: Some(0.5),
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}

fn past_latency(baseline: f64, candidate: f64) -> AnalysisRecord {
    AnalysisRecord {
        at: Time(Timestamp::now()),
        stage_index: 0,
        weight: 30,
        verdict: Verdict::Pass,
        baseline_requests: Some(120.0),
        candidate_requests: Some(120.0),
        checks: vec![CheckResult {
            name: "latency".into(),
            baseline: Some(baseline),
            candidate: Some(candidate),
            limit: String::new(),
            verdict: Verdict::Pass,
            reason: None,
            evidence: None,
        }],
        reason: None,
        capacity: None,
    }
}

fn check<'a>(o: &'a AnalysisOutcome, name: &str) -> &'a CheckResult {
    o.record.checks.iter().find(|c| c.name == name).unwrap()
}

fn close(v: Option<f64>, expected: f64, tol: f64, what: &str) {
    let v = v.unwrap_or_else(|| panic!("{what}: no value"));
    assert!((v - expected).abs() <= tol, "{what}: {v} vs {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analysis_against_a_real_prometheus() {
    let started = Instant::now();
    let pods = pods();
    let count = pods.len();
    let mut targets = Vec::new();
    for pod in pods {
        let name = pod.name;
        targets.push((name, serve(pod, started).await));
    }
    let mut prom = start_prometheus(NAMESPACE, &targets);
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, count, INTERVAL_SECS).await;

    // A regressed candidate: p99 doubles.
    let o = analyse(
        &client,
        &spec(&prom.url, 50),
        &ctx("storefront-candidate"),
        &[],
        &Default::default(),
    )
    .await;
    let r = &o.record;
    assert_eq!(r.verdict, Verdict::Fail, "{r:#?}");
    assert_eq!(r.reason.as_deref(), Some("failed: latency"), "{r:#?}");
    let latency = check(&o, "latency");
    close(latency.baseline, 0.475, 1e-6, "baseline p99");
    close(latency.candidate, 0.95, 1e-6, "candidate p99");
    assert_eq!(latency.limit, "max 700ms, maxIncrease 10%");
    assert_eq!(
        latency.reason.as_deref(),
        Some("candidate 950ms is above max 700ms (baseline 475ms)")
    );
    let query = &o.queries["latency"];
    assert!(
        query.contains(r#"pod=~"^storefront-candidate-["#),
        "{query}"
    );
    for (name, value) in [("errorRate", 0.01), ("gvlWait", 0.10)] {
        let c = check(&o, name);
        close(c.baseline, value, 1e-6, name);
        close(c.candidate, value, 1e-6, name);
        assert_eq!(c.verdict, Verdict::Pass, "{c:#?}");
    }
    let memory = check(&o, "memory");
    close(memory.baseline, 200.0 * MI, 1.0, "baseline memory");
    close(memory.candidate, 210.0 * MI, 1.0, "candidate memory");
    assert_eq!(memory.verdict, Verdict::Pass);
    // Each variant's regex selects exactly its own pod, not `storefront-x`'s.
    let pods_check = check(&o, "pods");
    assert_eq!(
        (pods_check.baseline, pods_check.candidate),
        (Some(1.0), Some(1.0))
    );
    let expected_requests = 20.0 * INTERVAL_SECS as f64;
    for (what, v) in [
        ("baseline", r.baseline_requests),
        ("candidate", r.candidate_requests),
    ] {
        close(v, expected_requests, expected_requests * 0.25, what);
    }
    let rec = o
        .recommendation
        .as_ref()
        .expect("recommendation from the I/O counters");
    assert!((rec.io_ratio - 0.52).abs() < 1e-6, "{rec:?}");
    assert_eq!(rec.threads, 4);
    assert!(!rec.async_server_advised);

    // Capacity: per request, the baseline pod spends 0.2 s × (1 − 0.52 − 0.10) = 76 ms running
    // and 104 ms on I/O, the candidate twice that (ratios of rates: exact); each pod serves
    // 20 req/s (a rate: within the scrape timing's extrapolation).
    let m = r.capacity.as_ref().expect("capacity measured");
    close(
        m.total_rate,
        40.0,
        0.4,
        "total rate of both pods, not storefront-x's",
    );
    let (b, c) = (m.baseline.as_ref().unwrap(), m.candidate.as_ref().unwrap());
    close(b.cpu_per_request, 0.076, 1e-9, "baseline CPU per request");
    close(b.io_per_request, 0.104, 1e-9, "baseline I/O per request");
    close(b.per_pod_rate, 20.0, 0.2, "baseline busiest pod");
    // Puma 2×6 would serve 2 / 76 ms = 26.3 req/s, but half a core caps it at 0.5 / 76 ms.
    close(b.capacity_per_pod, 0.5 / 0.076, 1e-6, "baseline capacity");
    assert_eq!(b.bound, Some(CapacityBound::CpuLimit));
    close(
        b.headroom,
        1.0 - 20.0 * 0.076 / 0.5,
        0.01,
        "baseline headroom",
    );
    close(c.cpu_per_request, 0.152, 1e-9, "candidate CPU per request");
    close(c.io_per_request, 0.208, 1e-9, "candidate I/O per request");
    // Puma 2×4 without a limit: the GVL (1 / 152 ms per worker) before the threads (4 / 360 ms).
    close(c.capacity_per_pod, 2.0 / 0.152, 1e-6, "candidate capacity");
    assert_eq!(c.bound, Some(CapacityBound::Gvl));
    assert!(
        c.headroom.unwrap() < 0.0,
        "20 req/s is above the estimate: {c:?}"
    );

    // A healthy candidate passes every check.
    let o = analyse(
        &client,
        &spec(&prom.url, 50),
        &ctx("storefront-good"),
        &[],
        &Default::default(),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Pass, "{:#?}", o.record);
    close(check(&o, "latency").candidate, 0.475, 1e-6, "good p99");

    assert!(!o.no_data);

    // At 100% the baseline serves nothing: the candidate is judged against the baseline
    // reference the stage machine kept, whatever the (here, empty) history holds.
    let full = AnalysisContext {
        weight: 100,
        ..ctx("storefront-good")
    };
    let reference = |latency: f64| {
        let r = |value| BaselineReference {
            value,
            at: Time(Timestamp::now()),
            stage_index: 1,
            weight: 70,
        };
        BTreeMap::from([
            ("latency".to_string(), r(latency)),
            ("memory".to_string(), r(200.0 * MI)),
        ])
    };
    let o = analyse(&client, &spec(&prom.url, 50), &full, &[], &reference(0.45)).await;
    assert_eq!(o.record.verdict, Verdict::Pass, "{:#?}", o.record);
    assert_eq!(check(&o, "latency").baseline, Some(0.45));
    // The baseline serves nothing at 100%: nothing of it is measured (absent, not 0).
    let m = o.record.capacity.as_ref().expect("capacity measured");
    assert_eq!(m.baseline, None, "{m:?}");
    close(
        m.candidate.as_ref().and_then(|c| c.per_pod_rate),
        20.0,
        0.2,
        "good pod",
    );
    let o = analyse(&client, &spec(&prom.url, 50), &full, &[], &reference(0.4)).await;
    assert_eq!(o.record.verdict, Verdict::Fail, "{:#?}", o.record);
    assert_eq!(check(&o, "latency").baseline, Some(0.4));
    let o = analyse(&client, &spec(&prom.url, 50), &full, &[], &BTreeMap::new()).await;
    assert_eq!(o.record.verdict, Verdict::Inconclusive, "{:#?}", o.record);
    assert!(!o.no_data, "the candidate has data");

    // No series at all for the candidate at 100% (nor for either variant below): no data,
    // which the stage machine warns about.
    let absent = AnalysisContext {
        weight: 100,
        ..ctx("storefront-absent")
    };
    let o = analyse(
        &client,
        &spec(&prom.url, 50),
        &absent,
        &[],
        &reference(0.45),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Inconclusive, "{:#?}", o.record);
    assert!(o.no_data, "{:#?}", o.record);
    let candidate = o.record.capacity.as_ref().and_then(|m| m.candidate.clone());
    assert_eq!(candidate, None, "no series: nothing measured, never zeros");
    let o = analyse(
        &client,
        &spec(&prom.url, 50),
        &ctx("storefront-absent"),
        &[],
        &BTreeMap::new(),
    )
    .await;
    assert!(!o.no_data, "the baseline has data below 100%");

    // With statistics on, past intervals where the candidate was clearly slower outweigh one
    // good interval: the Mann-Whitney test fails latency although 475ms passes every limit.
    let mut stat_spec = spec(&prom.url, 50);
    stat_spec.analysis.statistical = Some(Statistical {
        alpha: 0.05,
        min_samples: 5,
    });
    let history: Vec<AnalysisRecord> = (0..5).map(|_| past_latency(0.475, 0.7)).collect();
    let o = analyse(
        &client,
        &stat_spec,
        &ctx("storefront-good"),
        &history,
        &Default::default(),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Fail, "{:#?}", o.record);
    let reason = check(&o, "latency").reason.clone().unwrap();
    assert!(
        reason.contains("significantly above baseline + 10%"),
        "{reason}"
    );
    // ...and a history of equal latency keeps it passing.
    let history: Vec<AnalysisRecord> = (0..5).map(|_| past_latency(0.475, 0.47)).collect();
    let o = analyse(
        &client,
        &stat_spec,
        &ctx("storefront-good"),
        &history,
        &Default::default(),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Pass, "{:#?}", o.record);

    // Too few requests: the idle candidate cannot be judged.
    let o = analyse(
        &client,
        &spec(&prom.url, 50),
        &ctx("storefront-idle"),
        &[],
        &Default::default(),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Inconclusive, "{:#?}", o.record);
    let reason = o.record.reason.clone().unwrap();
    assert!(
        reason.starts_with("too few requests in the interval"),
        "{reason}"
    );

    // Prometheus unreachable: every check Inconclusive with the category, never Pass.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let down = PrometheusClient::new(&closed, Duration::from_secs(2)).unwrap();
    let o = analyse(
        &down,
        &spec(&closed, 50),
        &ctx("storefront-good"),
        &[],
        &Default::default(),
    )
    .await;
    assert_eq!(o.record.verdict, Verdict::Inconclusive);
    assert!(
        !o.no_data,
        "an unreachable Prometheus says nothing about the metrics"
    );
    assert!(
        o.record
            .reason
            .as_deref()
            .unwrap()
            .contains("PrometheusUnreachable"),
        "{:#?}",
        o.record
    );
    for c in &o.record.checks {
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:#?}");
        assert!(
            c.reason
                .as_deref()
                .unwrap()
                .contains("PrometheusUnreachable"),
            "{c:#?}"
        );
    }
    assert!(o.recommendation.is_none());
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(prom);
}
