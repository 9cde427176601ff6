//! The rules of one analysis that only show at 100 % weight, when the baseline serves nothing
//! — its reference values, `minRequests` for the candidate only, "no data", the capacity
//! estimate — against a table-driven `MetricSource`, and the same rules below 100 % for
//! contrast.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::{context, spec, FakeSource, Kind, Variant};
use crate::analysis::{analyse, PrometheusError};
use crate::api::{AnalysisRecord, BaselineReference, CheckResult, Verdict};

const LATENCY: &str = r#"[{metric: latency, quantile: 0.99, maxIncrease: "10%"}]"#;

fn reference(latency: f64) -> BTreeMap<String, BaselineReference> {
    BTreeMap::from([(
        "latency".to_string(),
        BaselineReference {
            value: latency,
            at: Time(Timestamp::UNIX_EPOCH),
            stage_index: 0,
            weight: 67,
        },
    )])
}

/// Requests and latency per variant; the baseline answers what it would with no pods serving
/// (no requests) but a stale latency of 1 s, which must never be what the candidate is judged by.
fn source(
    baseline_requests: Option<f64>,
    candidate_requests: Option<f64>,
    candidate_latency: Option<f64>,
) -> FakeSource {
    FakeSource::new(move |kind, variant| {
        Ok(match (kind, variant) {
            (Kind::Requests, Variant::Baseline) => baseline_requests,
            (Kind::Requests, Variant::Candidate) => candidate_requests,
            (Kind::Latency, Variant::Baseline) => Some(1.0),
            (Kind::Latency, Variant::Candidate) => candidate_latency,
            _ => None,
        })
    })
}

#[tokio::test]
async fn at_full_weight_the_candidate_is_judged_against_the_baseline_reference() {
    let spec = spec(LATENCY);
    let reference = reference(0.070);
    let fast = source(None, Some(600.0), Some(0.074));
    let out = analyse(&fast, &spec, &context(100), &[], &reference).await;
    assert_eq!(out.record.verdict, Verdict::Pass, "{:?}", out.record.reason);
    assert_eq!(out.record.checks[0].baseline, Some(0.070));
    assert_eq!(out.record.checks[0].candidate, Some(0.074));
    // More than 10 % above the reference fails, though the baseline's stale 1 s would pass it.
    let slow = source(None, Some(600.0), Some(0.080));
    let out = analyse(&slow, &spec, &context(100), &[], &reference).await;
    assert_eq!(out.record.verdict, Verdict::Fail, "{:?}", out.record.reason);
    assert_eq!(out.record.checks[0].baseline, Some(0.070));
}

#[tokio::test]
async fn at_full_weight_without_a_reference_the_last_measured_baseline_is_used() {
    let spec = spec(LATENCY);
    let measured = AnalysisRecord {
        at: Time(Timestamp::UNIX_EPOCH),
        stage_index: 1,
        weight: 67,
        verdict: Verdict::Pass,
        baseline_requests: Some(600.0),
        candidate_requests: Some(600.0),
        checks: vec![CheckResult {
            name: "latency".into(),
            baseline: Some(0.070),
            candidate: Some(0.071),
            limit: String::new(),
            verdict: Verdict::Pass,
            reason: None,
            evidence: None,
        }],
        reason: None,
        capacity: None,
    };
    let slow = source(None, Some(600.0), Some(0.080));
    let out = analyse(&slow, &spec, &context(100), &[measured], &BTreeMap::new()).await;
    assert_eq!(out.record.checks[0].baseline, Some(0.070));
    assert_eq!(out.record.verdict, Verdict::Fail, "{:?}", out.record.reason);
    // Nothing measured at all: never a Pass.
    let out = analyse(&slow, &spec, &context(100), &[], &BTreeMap::new()).await;
    assert_eq!(out.record.checks[0].baseline, None);
    assert_ne!(out.record.verdict, Verdict::Pass, "{:?}", out.record.reason);
}

#[tokio::test]
async fn at_full_weight_only_the_candidate_needs_min_requests() {
    let spec = spec(LATENCY);
    let reference = reference(0.070);
    // The baseline served nothing: that is no reason to wait.
    let out = analyse(
        &source(None, Some(600.0), Some(0.070)),
        &spec,
        &context(100),
        &[],
        &reference,
    )
    .await;
    assert_eq!(out.record.verdict, Verdict::Pass, "{:?}", out.record.reason);
    // Too few candidate requests is Inconclusive.
    let out = analyse(
        &source(None, Some(10.0), Some(0.070)),
        &spec,
        &context(100),
        &[],
        &reference,
    )
    .await;
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    let reason = out.record.reason.unwrap();
    assert!(reason.contains("candidate 10"), "{reason}");
    assert!(reason.contains("minRequests 50"), "{reason}");
    // Nor does a failed count of the baseline's requests (below 100 % it is Inconclusive).
    let failing = FakeSource::new(|kind, variant| match (kind, variant) {
        (Kind::Requests, Variant::Baseline) => Err(PrometheusError::Unreachable("down".into())),
        (Kind::Latency, Variant::Baseline) => Ok(Some(1.0)),
        (Kind::Requests, Variant::Candidate) => Ok(Some(600.0)),
        (Kind::Latency, Variant::Candidate) => Ok(Some(0.070)),
        _ => Ok(None),
    });
    let out = analyse(&failing, &spec, &context(100), &[], &reference).await;
    assert_eq!(out.record.verdict, Verdict::Pass, "{:?}", out.record.reason);
    let out = analyse(&failing, &spec, &context(67), &[], &reference).await;
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    let reason = out.record.reason.unwrap();
    assert!(reason.contains("PrometheusUnreachable"), "{reason}");
}

#[tokio::test]
async fn below_full_weight_both_variants_need_min_requests() {
    let spec = spec(LATENCY);
    let few = source(Some(10.0), Some(600.0), Some(1.0));
    let out = analyse(&few, &spec, &context(67), &[], &BTreeMap::new()).await;
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    let reason = out.record.reason.unwrap();
    assert!(reason.contains("baseline 10"), "{reason}");
    // And the baseline is measured now, not taken from the reference.
    let enough = source(Some(600.0), Some(600.0), Some(1.0));
    let out = analyse(&enough, &spec, &context(67), &[], &reference(0.070)).await;
    assert_eq!(out.record.checks[0].baseline, Some(1.0));
    assert_eq!(out.record.verdict, Verdict::Pass, "{:?}", out.record.reason);
}

#[tokio::test]
async fn no_data_at_full_weight_is_the_candidate_alone() {
    let spec = spec(LATENCY);
    let reference = reference(0.070);
    // The candidate has no latency sample: no data, though the baseline still answers.
    let empty = source(None, Some(600.0), None);
    let out = analyse(&empty, &spec, &context(100), &[], &reference).await;
    assert!(out.no_data);
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    // Below 100 % the baseline's sample means the metrics exist.
    let out = analyse(&empty, &spec, &context(67), &[], &reference).await;
    assert!(!out.no_data);
    // A failed query says nothing about the metrics: Inconclusive, not "no data".
    let down = FakeSource::new(|_, _| Err(PrometheusError::Unreachable("down".into())));
    let out = analyse(&down, &spec, &context(100), &[], &reference).await;
    assert!(!out.no_data);
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    let reason = out.record.checks[0].reason.clone().unwrap();
    assert!(reason.contains("PrometheusUnreachable"), "{reason}");
}

/// 2 ms CPU and 60 ms I/O per request, 10 req/s on the busiest pod, 30 req/s in all.
fn measured_app() -> FakeSource {
    FakeSource::new(|kind, variant| {
        Ok(match (kind, variant) {
            (Kind::Requests, Variant::Baseline | Variant::Candidate) => Some(600.0),
            (Kind::Latency, Variant::Baseline | Variant::Candidate) => Some(0.070),
            (Kind::CpuPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.002),
            (Kind::IoPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.060),
            (Kind::BusiestPod, Variant::Baseline | Variant::Candidate) => Some(10.0),
            (Kind::TotalRate, Variant::Both) => Some(30.0),
            _ => None,
        })
    })
}

#[tokio::test]
async fn at_full_weight_capacity_is_estimated_for_the_candidate_only() {
    let spec = spec(LATENCY);
    let app = measured_app();
    let out = analyse(&app, &spec, &context(100), &[], &reference(0.070)).await;
    let capacity = out.record.capacity.expect("a capacity measurement");
    assert_eq!(capacity.baseline, None);
    assert!(!app.was_asked(Kind::CpuPerRequest, Variant::Baseline));
    assert!(!app.was_asked(Kind::BusiestPod, Variant::Baseline));
    let candidate = capacity.candidate.expect("the candidate's capacity");
    // Puma 2×4: 2 workers × min(4 / (cpu + io), 1 / cpu) requests/s.
    let per_pod = candidate.capacity_per_pod.unwrap();
    assert!((per_pod - 2.0 * 4.0 / 0.062).abs() < 1e-6, "{per_pod}");
    let headroom = candidate.headroom.unwrap();
    assert!(
        (headroom - (1.0 - 10.0 / per_pod)).abs() < 1e-9,
        "{headroom}"
    );
    assert_eq!(capacity.total_rate, Some(30.0));
}

#[tokio::test]
async fn below_full_weight_capacity_is_estimated_for_both_variants() {
    let spec = spec(LATENCY);
    let out = analyse(&measured_app(), &spec, &context(67), &[], &BTreeMap::new()).await;
    let capacity = out.record.capacity.expect("a capacity measurement");
    // The baseline's own config, Puma 2×6, read back from the target.
    let baseline = capacity.baseline.expect("the baseline's capacity");
    let per_pod = baseline.capacity_per_pod.unwrap();
    assert!((per_pod - 2.0 * 6.0 / 0.062).abs() < 1e-6, "{per_pod}");
    assert!(capacity.candidate.is_some());
}
