//! The built-in `headroom` check: each variant's margin to its estimated capacity, from the
//! capacity measurement of the same analysis (no query of its own), judged by `min`.

use std::collections::BTreeMap;

use super::fixtures::{analysis, context, spec, FakeSource, Kind, Variant};
use crate::analysis::{analyse, validate, HEADROOM_SOURCE};
use crate::api::Verdict;

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

#[test]
fn headroom_needs_no_query_but_the_capacity_model_s_metric_names() {
    assert_eq!(validate(&analysis(HEADROOM)), Ok(()));
    let mut bad = analysis(HEADROOM);
    bad.metrics.running_seconds = Some("not a name".into());
    let err = validate(&bad).unwrap_err().to_string();
    assert!(err.contains("runningSeconds"), "{err}");
}
