//! The built-in `headroom` check: each variant's margin to its estimated capacity, from the
//! capacity measurement of the same analysis (no query of its own), judged by `min`.

use std::collections::BTreeMap;

use super::fixtures::{analysis, context, spec, FakeSource, Kind, Variant};
use crate::analysis::{analyse, validate, HEADROOM_SOURCE};
use crate::api::{CapacitySource, Verdict};

/// 2 ms CPU + 60 ms I/O per request; the busiest pod serves `busiest` req/s.
fn app(busiest: f64) -> FakeSource {
    FakeSource::new(move |kind, variant| {
        Ok(match (kind, variant) {
            (Kind::Requests, Variant::Baseline | Variant::Candidate) => Some(600.0),
            (Kind::CpuPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.002),
            (Kind::IoPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.060),
            (Kind::BusiestPod, Variant::Baseline | Variant::Candidate) => Some(busiest),
            (Kind::TotalRate, Variant::Both) => Some(3.0 * busiest),
            _ => None,
        })
    })
}

const HEADROOM: &str = r#"[{metric: headroom, min: "30%"}]"#;

/// One analysis at 50 % with the headroom check, the busiest pod at `busiest` req/s.
async fn at(busiest: f64) -> crate::analysis::AnalysisOutcome {
    analyse(
        &app(busiest),
        &spec(HEADROOM),
        &context(50),
        &[],
        &BTreeMap::new(),
    )
    .await
}

#[tokio::test]
async fn a_config_far_from_its_capacity_passes() {
    // Puma 2×4 at 62 ms: 2 × 4 / 0.062 = 129 req/s per pod; 30 req/s leaves 77 %.
    let out = at(30.0).await;
    let c = &out.record.checks[0];
    assert_eq!(
        (c.name.as_str(), c.verdict),
        ("headroom", Verdict::Pass),
        "{c:?}"
    );
    let candidate = c.candidate.unwrap();
    assert!(
        (candidate - (1.0 - 30.0 / (8.0 / 0.062))).abs() < 1e-9,
        "{candidate}"
    );
    // The baseline's (Puma 2×6) is shown beside it.
    let baseline = c.baseline.unwrap();
    assert!(
        (baseline - (1.0 - 30.0 / (12.0 / 0.062))).abs() < 1e-9,
        "{baseline}"
    );
    assert_eq!(out.queries["headroom"], HEADROOM_SOURCE);
    assert_eq!(c.limit, "min 30%");
    assert_eq!(out.record.verdict, Verdict::Pass);
}

#[tokio::test]
async fn a_config_that_passes_only_because_traffic_is_light_is_refused() {
    // 100 req/s on a 129 req/s pod: 22 % left, below the 30 % asked.
    let out = at(100.0).await;
    let c = &out.record.checks[0];
    assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
    assert_eq!(out.record.verdict, Verdict::Fail);
}

#[tokio::test]
async fn without_the_capacity_counters_headroom_is_inconclusive_never_a_pass() {
    let blind = FakeSource::new(|kind, variant| {
        Ok(match (kind, variant) {
            (Kind::Requests, Variant::Baseline | Variant::Candidate) => Some(600.0),
            _ => None,
        })
    });
    let out = analyse(&blind, &spec(HEADROOM), &context(50), &[], &BTreeMap::new()).await;
    assert_eq!(out.record.checks[0].verdict, Verdict::Inconclusive);
    assert_ne!(out.record.verdict, Verdict::Pass);
}

/// The same app seen only through standard metrics: no GVL counters; the container's CPU is
/// 3 ms per request (the server's own work counts in) and a request takes 62 ms wall.
fn standard_app(busiest: f64) -> FakeSource {
    FakeSource::new(move |kind, variant| {
        Ok(match (kind, variant) {
            (Kind::Requests, Variant::Baseline | Variant::Candidate) => Some(600.0),
            (Kind::ContainerCpu, _) => Some(0.003),
            (Kind::WallPerRequest, _) => Some(0.062),
            (Kind::BusiestPod, Variant::Baseline | Variant::Candidate) => Some(busiest),
            (Kind::TotalRate, Variant::Both) => Some(3.0 * busiest),
            _ => None,
        })
    })
}

#[tokio::test]
async fn without_the_gvl_counters_headroom_comes_from_standard_metrics_and_says_so() {
    let out = analyse(
        &standard_app(30.0),
        &spec(HEADROOM),
        &context(50),
        &[],
        &BTreeMap::new(),
    )
    .await;
    let c = &out.record.checks[0];
    assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    // Puma 2×4 at 3 ms CPU + 59 ms I/O: 8 / 0.062 per pod, as with the counters.
    let candidate = c.candidate.unwrap();
    assert!(
        (candidate - (1.0 - 30.0 / (8.0 / 0.062))).abs() < 1e-9,
        "{candidate}"
    );
    let reason = c.reason.as_deref().unwrap();
    assert!(
        reason.ends_with("(capacity from standard metrics)"),
        "{reason}"
    );
    let m = out.record.capacity.as_ref().unwrap();
    for v in [m.baseline.as_ref().unwrap(), m.candidate.as_ref().unwrap()] {
        assert_eq!(v.source, Some(CapacitySource::StandardMetrics));
        assert!((v.cpu_per_request.unwrap() - 0.003).abs() < 1e-12);
        assert!((v.io_per_request.unwrap() - 0.059).abs() < 1e-12);
    }
    // The recommendation's I/O share from the same: 59 / 62.
    let rec = out
        .recommendation
        .expect("a recommendation without the counters");
    assert!((rec.io_ratio - 59.0 / 62.0).abs() < 1e-9, "{rec:?}");
    assert_eq!(rec.source, Some(CapacitySource::StandardMetrics));
    assert!(rec.message.contains("standard metrics"), "{}", rec.message);
}

#[tokio::test]
async fn with_the_gvl_counters_the_standard_metrics_are_not_asked() {
    let src = FakeSource::new(|kind, variant| {
        Ok(match (kind, variant) {
            (Kind::IoShare, Variant::Both) => Some(0.9),
            (Kind::Requests, Variant::Baseline | Variant::Candidate) => Some(600.0),
            (Kind::CpuPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.002),
            (Kind::IoPerRequest, Variant::Baseline | Variant::Candidate) => Some(0.060),
            (Kind::BusiestPod, Variant::Baseline | Variant::Candidate) => Some(30.0),
            (Kind::TotalRate, Variant::Both) => Some(90.0),
            _ => None,
        })
    });
    let out = analyse(&src, &spec(HEADROOM), &context(50), &[], &BTreeMap::new()).await;
    let m = out.record.capacity.as_ref().unwrap();
    assert_eq!(
        m.candidate.as_ref().unwrap().source,
        Some(CapacitySource::GvlCounters)
    );
    let reason = out.record.checks[0].reason.as_deref().unwrap();
    assert!(reason.ends_with("(capacity from GVL counters)"), "{reason}");
    assert_eq!(
        out.recommendation.unwrap().source,
        Some(CapacitySource::GvlCounters)
    );
    for v in [Variant::Baseline, Variant::Candidate, Variant::Both] {
        assert!(!src.was_asked(Kind::ContainerCpu, v), "{v:?}");
        assert!(!src.was_asked(Kind::WallPerRequest, v), "{v:?}");
    }
}

#[test]
fn headroom_needs_no_query_but_the_capacity_model_s_metric_names() {
    assert_eq!(validate(&analysis(HEADROOM)), Ok(()));
    let mut bad = analysis(HEADROOM);
    bad.metrics.running_seconds = Some("not a name".into());
    let err = validate(&bad).unwrap_err().to_string();
    assert!(err.contains("runningSeconds"), "{err}");
}
