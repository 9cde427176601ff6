//! Quantile checks under the prometheusExporter preset: the metric's type is looked up per
//! variant, a Summary is used for one pod only, and a refusal says why.

use std::sync::Mutex;

use jiff::Timestamp;

use super::fixtures::{context, spec};
use crate::analysis::{analyse, MetricSource, PrometheusError};
use crate::api::{MetricPreset, Verdict};

/// What the variant's exporter looks like to Prometheus.
#[derive(Clone, Copy)]
struct Shape {
    /// Histogram bucket series (`--histogram`).
    buckets: bool,
    /// Pods with Summary series.
    summary_pods: u32,
    /// The quantile series asked for exists.
    quantile: bool,
    value: f64,
}

struct Exporters {
    baseline: Shape,
    candidate: Shape,
    asked: Mutex<Vec<String>>,
}

impl MetricSource for Exporters {
    async fn query_value(&self, q: &str, _at: Timestamp) -> Result<Option<f64>, PrometheusError> {
        self.asked.lock().unwrap().push(q.to_string());
        let s = if q.contains("storefront-candidate-") {
            self.candidate
        } else {
            self.baseline
        };
        let some = |b: bool, v: f64| Ok(b.then_some(v));
        if q.starts_with("sum(increase(") {
            return Ok(Some(1000.0));
        }
        if !q.contains("ruby_http_request_duration_seconds") {
            return Ok(None);
        }
        if q.starts_with("count(ruby_http_request_duration_seconds_bucket") {
            some(s.buckets, 12.0)
        } else if q.starts_with("count(count by (pod)") {
            some(s.summary_pods > 0, f64::from(s.summary_pods))
        } else if q.starts_with("count(max(") {
            some(s.quantile, 1.0)
        } else if q.starts_with("max(ruby_http_request_duration_seconds{") {
            assert!(q.contains(r#"quantile=~"0\\.90*""#), "{q}");
            some(s.quantile, s.value)
        } else if q.starts_with("histogram_quantile(0.9,") {
            some(s.buckets, s.value)
        } else if q.starts_with("sum(rate(ruby_http_request_duration_seconds_sum") {
            // The capacity model's wall time per request: not this test's subject.
            Ok(None)
        } else {
            panic!("unexpected query {q}")
        }
    }
}

const SUMMARY: Shape = Shape {
    buckets: false,
    summary_pods: 1,
    quantile: true,
    value: 0.2,
};

async fn latency(
    baseline: Shape,
    candidate: Shape,
    preset: MetricPreset,
) -> (crate::api::CheckResult, String, Vec<String>) {
    let mut s = spec(r#"[{metric: latency, quantile: 0.9, max: 500ms}]"#);
    s.analysis.metrics.preset = Some(preset);
    let source = Exporters {
        baseline,
        candidate,
        asked: Mutex::new(Vec::new()),
    };
    let out = analyse(&source, &s, &context(50), &[], &Default::default()).await;
    let asked = source.asked.lock().unwrap().clone();
    let query = out.queries.get("latency").cloned().unwrap_or_default();
    (out.record.checks[0].clone(), query, asked)
}

#[tokio::test]
async fn a_summary_on_one_pod_is_read_from_its_quantile_series() {
    let cand = Shape {
        value: 0.3,
        ..SUMMARY
    };
    let (c, query, _) = latency(SUMMARY, cand, MetricPreset::PrometheusExporter).await;
    assert_eq!((c.baseline, c.candidate), (Some(0.2), Some(0.3)));
    assert_eq!(c.verdict, Verdict::Pass, "{:?}", c.reason);
    assert!(
        query.starts_with("max(ruby_http_request_duration_seconds{"),
        "{}",
        query
    );
}

#[tokio::test]
async fn a_histogram_from_the_same_exporter_is_a_histogram_quantile() {
    let hist = Shape {
        buckets: true,
        summary_pods: 0,
        quantile: false,
        value: 0.7,
    };
    let (c, query, asked) = latency(hist, hist, MetricPreset::PrometheusExporter).await;
    assert_eq!(c.candidate, Some(0.7));
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(query.starts_with("histogram_quantile(0.9,"), "{}", query);
    // Known to be a histogram from its buckets: no Summary probe.
    assert!(!asked.iter().any(|q| q.starts_with("count(count by (pod)")));
}

#[tokio::test]
async fn a_summary_over_several_pods_is_refused_with_the_reason() {
    let three = Shape {
        summary_pods: 3,
        ..SUMMARY
    };
    let (c, _, asked) = latency(three, SUMMARY, MetricPreset::PrometheusExporter).await;
    assert_eq!(c.verdict, Verdict::Inconclusive);
    assert_eq!((c.baseline, c.candidate), (None, None));
    let reason = c.reason.unwrap();
    assert!(
        reason.contains(
            "spec.analysis.metrics.requestDuration ruby_http_request_duration_seconds is a Summary"
        ) && reason.contains("the baseline has 3 pods")
            && reason.contains("cannot be combined across pods")
            && reason.contains("--histogram")
            && reason.ends_with("(SummaryAcrossPods)"),
        "{reason}"
    );
    // Refused, not guessed: no quantile was read for either variant.
    assert!(!asked.iter().any(|q| q.starts_with("max(ruby_http")));
}

#[tokio::test]
async fn a_quantile_the_summary_does_not_have_is_refused() {
    let none = Shape {
        quantile: false,
        ..SUMMARY
    };
    let (c, _, _) = latency(SUMMARY, none, MetricPreset::PrometheusExporter).await;
    assert_eq!(c.verdict, Verdict::Inconclusive);
    let reason = c.reason.unwrap();
    assert!(
        reason.contains(r#"without a quantile="0.9" series for the candidate"#)
            && reason.ends_with("(SummaryQuantileMissing)"),
        "{reason}"
    );
}

#[tokio::test]
async fn no_series_at_all_is_no_data_not_a_refusal() {
    let nothing = Shape {
        buckets: false,
        summary_pods: 0,
        quantile: false,
        value: 0.0,
    };
    let (c, query, _) = latency(nothing, nothing, MetricPreset::PrometheusExporter).await;
    assert_eq!(c.verdict, Verdict::Inconclusive);
    assert!(c.reason.unwrap().starts_with("no value for the candidate"));
    assert!(query.starts_with("histogram_quantile("));
}

#[tokio::test]
async fn other_presets_never_probe_the_type() {
    let (_, _, asked) = latency(SUMMARY, SUMMARY, MetricPreset::Yabeda).await;
    assert!(!asked.iter().any(|q| q.starts_with("count(")), "{asked:?}");
}
