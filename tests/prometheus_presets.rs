//! Exporter presets against a real Prometheus scraping fixture exporters that write each Ruby
//! exporter's exact text format (`prometheus_analysis/exporters.rs`): every built-in check
//! must find its series under `spec.analysis.metrics.preset` alone, and a Summary spread over
//! pods must be refused with the reason.

#[allow(dead_code)]
#[path = "prometheus_analysis/exporters.rs"]
mod exporters;
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use concurrency_operator::analysis::{analyse, AnalysisContext};
use concurrency_operator::api::{CheckResult, ConcurrencyExperimentSpec, Verdict};
use concurrency_operator::plan::AnalysisOutcome;
use concurrency_operator::prometheus::PrometheusClient;
use exporters::{App, Format, Worker};
use harness::{serve_text, start_prometheus, wait_for_data};
use jiff::Timestamp;

const NAMESPACE: &str = "shop";
const INTERVAL_SECS: u64 = 6;

fn worker(backlog: f64, busy: f64, capacity: f64, max: f64) -> Worker {
    Worker {
        backlog,
        busy,
        capacity,
        max,
    }
}

fn app(format: Format, latency_max: f64, workers: Vec<Worker>) -> App {
    App {
        format,
        rps: 20.0,
        error_share: 0.01,
        latency_max,
        queue_max: 0.01,
        summary_max: [0.3, 0.5],
        workers,
    }
}

const SUMMARY: Format = Format::PrometheusExporter {
    histogram: false,
    busy_gauge: false,
};
const HISTOGRAM: Format = Format::PrometheusExporter {
    histogram: true,
    busy_gauge: true,
};

/// Pods by Deployment: `yb` (yabeda), `pe` (prometheus_exporter, Summaries, one pod each),
/// `pm` (Summaries, two baseline pods), `ph` (`--histogram`, two baseline pods), `ra` (the
/// reference images).
fn fixtures() -> Vec<(&'static str, App)> {
    let idle = || vec![worker(0.0, 2.0, 3.0, 5.0), worker(1.0, 4.0, 1.0, 5.0)];
    // Every thread busy and requests waiting: Puma's busy_threads counts them in.
    let saturated = || vec![worker(2.0, 6.0, 0.0, 4.0), worker(4.0, 8.0, 0.0, 4.0)];
    vec![
        ("yb-7d9c5b6f4b-x2k9q", app(Format::Yabeda, 0.5, idle())),
        (
            "yb-candidate-5f4d8c9b7-b2c4d",
            App {
                queue_max: 0.1,
                ..app(Format::Yabeda, 1.0, saturated())
            },
        ),
        ("pe-7d9c5b6f4b-x2k9q", app(SUMMARY, 0.5, idle())),
        (
            "pe-candidate-5f4d8c9b7-b2c4d",
            App {
                summary_max: [0.2, 0.25],
                ..app(SUMMARY, 0.5, saturated())
            },
        ),
        ("pm-7d9c5b6f4b-x2k9q", app(SUMMARY, 0.5, idle())),
        ("pm-7d9c5b6f4b-h7kzq", app(SUMMARY, 0.5, idle())),
        ("pm-candidate-5f4d8c9b7-b2c4d", app(SUMMARY, 0.5, idle())),
        ("ph-7d9c5b6f4b-x2k9q", app(HISTOGRAM, 0.5, idle())),
        ("ph-7d9c5b6f4b-h7kzq", app(HISTOGRAM, 0.5, idle())),
        (
            "ph-candidate-5f4d8c9b7-b2c4d",
            app(HISTOGRAM, 1.0, saturated()),
        ),
        (
            "ra-7d9c5b6f4b-x2k9q",
            app(Format::ReferenceApp, 0.5, idle()),
        ),
        (
            "ra-candidate-5f4d8c9b7-b2c4d",
            app(Format::ReferenceApp, 1.0, saturated()),
        ),
    ]
}

fn spec(url: &str, metrics: &str, checks: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        r#"
targetRef: {{name: storefront}}
candidate: {{server: puma, workers: 2, threads: 4}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: {INTERVAL_SECS}s
  minRequests: 50
  maxPredictedUtilization: "off"
  metrics: {metrics}
  checks: {checks}
"#
    ))
    .unwrap()
}

fn ctx(deployment: &str) -> AnalysisContext {
    AnalysisContext {
        namespace: NAMESPACE.into(),
        container: "web".into(),
        baseline_deployment: deployment.into(),
        candidate_deployment: format!("{deployment}-candidate"),
        stage_index: 0,
        stage_started_at: None,
        weight: 30,
        now: Timestamp::now(),
        baseline_config: None,
        baseline_cpu_limit: None,
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}

fn check<'a>(o: &'a AnalysisOutcome, name: &str) -> &'a CheckResult {
    o.record.checks.iter().find(|c| c.name == name).unwrap()
}

fn close(v: Option<f64>, expected: f64, what: &str) {
    let v = v.unwrap_or_else(|| panic!("{what}: no value"));
    assert!((v - expected).abs() <= 1e-6, "{what}: {v} vs {expected}");
}

/// Baseline and candidate value of check `name`, and its verdict.
fn values(o: &AnalysisOutcome, name: &str, baseline: f64, candidate: f64, verdict: Verdict) {
    let c = check(o, name);
    close(c.baseline, baseline, &format!("{name} baseline"));
    close(c.candidate, candidate, &format!("{name} candidate"));
    assert_eq!(c.verdict, verdict, "{c:#?}");
}

/// Requests counted through the preset's counter: 20/s over the interval.
fn requests_counted(o: &AnalysisOutcome) {
    for r in [o.record.baseline_requests, o.record.candidate_requests] {
        let r = r.expect("request count");
        assert!((r - 20.0 * INTERVAL_SECS as f64).abs() <= 25.0, "{r}");
    }
}

const PUMA_CHECKS: &str = r#"
    - {metric: backlog, max: 3}
    - {metric: threadUtilization, max: "90%"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presets_against_a_real_prometheus() {
    let started = Instant::now();
    let mut targets = Vec::new();
    for (pod, app) in fixtures() {
        targets.push((pod, serve_text(move |t| app.text(t), started).await));
    }
    let mut prom = start_prometheus(NAMESPACE, &targets);
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, targets.len(), INTERVAL_SECS).await;
    let url = prom.url.clone();
    let run = |metrics: &str, checks: String, deployment: &str| {
        let s = spec(&url, metrics, &checks);
        let c = ctx(deployment);
        let client = &client;
        async move { analyse(client, &s, &c, &[], &Default::default()).await }
    };

    // yabeda: histograms with yabeda-rails' labels, rack-queue's unlabelled histogram, the
    // puma plugin's per-worker gauges (`index`) with busy_threads.
    let o = run(
        "{preset: yabeda}",
        format!(
            r#"
    - {{metric: latency, quantile: 0.9, max: 800ms}}
    - {{metric: errorRate, max: "2%"}}
    - {{metric: queueTime, quantile: 0.9, max: 50ms}}{PUMA_CHECKS}"#
        ),
        "yb",
    )
    .await;
    requests_counted(&o);
    values(&o, "latency", 0.45, 0.9, Verdict::Fail);
    values(&o, "errorRate", 0.01, 0.01, Verdict::Pass);
    values(&o, "queueTime", 0.009, 0.09, Verdict::Fail);
    values(&o, "backlog", 1.0, 6.0, Verdict::Fail);
    values(
        &o,
        "threadUtilization",
        6.0 / 10.0,
        14.0 / 8.0,
        Verdict::Fail,
    );

    // prometheus_exporter, Summaries, one pod per variant: the highest per-controller
    // quantile; no busy-threads gauge (collector without Puma), so busy = max − capacity.
    let o = run(
        "{preset: prometheusExporter}",
        format!(
            r#"
    - {{metric: latency, quantile: 0.9, max: 400ms}}
    - {{name: p95, metric: latency, quantile: 0.95, max: 1s}}
    - {{metric: errorRate, max: "2%"}}{PUMA_CHECKS}"#
        ),
        "pe",
    )
    .await;
    requests_counted(&o);
    values(&o, "latency", 0.9 * 0.5, 0.9 * 0.25, Verdict::Pass);
    values(&o, "errorRate", 0.01, 0.01, Verdict::Pass);
    values(&o, "backlog", 1.0, 6.0, Verdict::Fail);
    values(&o, "threadUtilization", 6.0 / 10.0, 1.0, Verdict::Fail);
    let p95 = check(&o, "p95");
    assert_eq!(p95.verdict, Verdict::Inconclusive);
    let reason = p95.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains(r#"is a Summary without a quantile="0.95" series for the baseline"#)
            && reason.ends_with("(SummaryQuantileMissing)"),
        "{reason}"
    );

    // The same exporter on two baseline pods: refused, saying why.
    let o = run(
        "{preset: prometheusExporter}",
        "[{metric: latency, quantile: 0.9, max: 400ms}]".into(),
        "pm",
    )
    .await;
    let latency = check(&o, "latency");
    assert_eq!(latency.verdict, Verdict::Inconclusive);
    assert_eq!(o.record.verdict, Verdict::Inconclusive);
    let reason = latency.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(
            "spec.analysis.metrics.requestDuration ruby_http_request_duration_seconds is a Summary \
             (prometheus_exporter without --histogram) and the baseline has 2 pods: a \
             Summary's quantiles cannot be combined across pods. Run prometheus_exporter with \
             --histogram"
        ) && reason.ends_with("(SummaryAcrossPods)"),
        "{reason}"
    );

    // `--histogram`: a histogram quantile over both baseline pods; busy_threads is there.
    let o = run(
        "{preset: prometheusExporter}",
        format!("\n    - {{metric: latency, quantile: 0.9, max: 800ms}}{PUMA_CHECKS}"),
        "ph",
    )
    .await;
    values(&o, "latency", 0.45, 0.9, Verdict::Fail);
    assert!(o.queries["latency"].starts_with("histogram_quantile(0.9,"));
    values(&o, "backlog", 1.0, 6.0, Verdict::Fail);
    values(
        &o,
        "threadUtilization",
        6.0 / 10.0,
        14.0 / 8.0,
        Verdict::Fail,
    );

    // No preset: the reference images' names, and an explicit name still overrides a preset.
    let o = run("{}", PUMA_CHECKS.into(), "ra").await;
    values(&o, "backlog", 1.0, 6.0, Verdict::Fail);
    values(&o, "threadUtilization", 6.0 / 10.0, 1.0, Verdict::Fail);
    let o = run(
        "{preset: prometheusExporter, requestsTotal: rails_requests_total, backlog: puma_backlog}",
        PUMA_CHECKS.into(),
        "ra",
    )
    .await;
    requests_counted(&o);
    values(&o, "backlog", 1.0, 6.0, Verdict::Fail);
    // prometheus_exporter's thread gauges do not exist for these pods.
    assert_eq!(check(&o, "threadUtilization").candidate, None);
}
