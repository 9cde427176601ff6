//! `judge: sequential`: one check's verdict from the stage's buckets and counts (`decide`), and
//! a whole analysis reading them from a source.

use jiff::Timestamp;

use crate::analysis::sequential::rate::Counts;
use crate::analysis::sequential::{decide, per_test_alpha, Bounds, Buckets, Data};
use crate::analysis::{analyse, AnalysisContext, MetricSource, PrometheusError};
use crate::api::{ConcurrencyExperimentSpec, Shown, Verdict};

use super::fixtures::context;

const LE: [f64; 8] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// `n` requests spread over the buckets as `shares` (one per bound, the rest above the last).
fn histogram(n: f64, shares: [f64; 8]) -> Buckets {
    let mut running = 0.0;
    let pairs = LE
        .iter()
        .zip(shares)
        .map(|(le, s)| {
            running += s * n;
            (*le, running)
        })
        .chain([(f64::INFINITY, n)])
        .collect();
    Buckets::from_pairs(pairs)
}

/// Most requests between 25 and 100 ms, as a web app's.
const APP: [f64; 8] = [0.0, 0.02, 0.18, 0.5, 0.25, 0.04, 0.01, 0.0];
/// The same app with every request twice as long: one bucket up.
const SLOWER: [f64; 8] = [0.0, 0.0, 0.02, 0.18, 0.5, 0.25, 0.04, 0.01];

fn quantile(p: f64, baseline: Buckets, candidate: Buckets) -> Data {
    Data::Quantile {
        p,
        baseline: Some(baseline),
        candidate,
        floor: None,
    }
}

fn ms(v: f64) -> String {
    format!("{}ms", v * 1000.0)
}

const P90_10: Bounds = Bounds {
    ratio: Some(1.1),
    max: None,
};

#[test]
fn a_candidate_twice_as_slow_is_shown_worse_with_its_bound() {
    let alpha = per_test_alpha(0.05, 3, 3);
    let data = quantile(0.9, histogram(500.0, APP), histogram(500.0, SLOWER));
    let (verdict, reason, evidence) = decide(&data, P90_10, alpha, ms);
    assert_eq!(verdict, Verdict::Fail, "{reason}");
    assert_eq!(evidence.shown, Shown::Worse);
    let above = evidence.ratio_above.expect("a lower bound on the ratio");
    assert!(above > 1.1 && above < 2.5, "{above}");
    assert!(reason.contains("shown above ×"), "{reason}");
    assert!(reason.contains("500 requests per variant"), "{reason}");
}

#[test]
fn the_same_config_is_never_shown_worse_and_ends_up_shown_within_the_tolerance() {
    let alpha = per_test_alpha(0.05, 3, 3);
    let few = quantile(0.5, histogram(300.0, APP), histogram(300.0, APP));
    let (verdict, reason, evidence) = decide(&few, P90_10, alpha, ms);
    assert_eq!(verdict, Verdict::Pass, "{reason}");
    assert_eq!(evidence.shown, Shown::Open, "{reason}");
    assert!(reason.contains("not yet shown"), "{reason}");
    let many = quantile(0.5, histogram(20000.0, APP), histogram(20000.0, APP));
    let (verdict, reason, evidence) = decide(&many, P90_10, alpha, ms);
    assert_eq!(verdict, Verdict::Pass, "{reason}");
    assert_eq!(evidence.shown, Shown::NoWorse, "{reason}");
    let within = evidence.ratio_within.expect("an upper bound on the ratio");
    assert!(within <= 1.1, "{within}");
}

#[test]
fn too_few_requests_wait_and_say_how_many_more() {
    let alpha = per_test_alpha(0.05, 3, 3);
    let data = quantile(0.99, histogram(100.0, APP), histogram(80.0, SLOWER));
    let (verdict, reason, evidence) = decide(&data, P90_10, alpha, ms);
    assert_eq!(verdict, Verdict::Inconclusive, "{reason}");
    assert_eq!(evidence.shown, Shown::Waiting);
    let more = evidence.needs_requests.expect("how many more");
    assert!(more > 500.0, "p99 needs hundreds: {more}");
    assert!(
        reason.starts_with(&format!("needs {more} more requests")),
        "{reason}"
    );
}

#[test]
fn an_absolute_max_is_tested_on_the_candidate_alone() {
    let alpha = per_test_alpha(0.05, 1, 3);
    let max = Bounds {
        ratio: None,
        max: Some(0.05),
    };
    let data = Data::Quantile {
        p: 0.9,
        baseline: None,
        candidate: histogram(2000.0, SLOWER),
        floor: None,
    };
    let (verdict, reason, _) = decide(&data, max, alpha, ms);
    assert_eq!(verdict, Verdict::Fail, "{reason}");
    assert!(reason.contains("above max 50ms"), "{reason}");
    let data = Data::Quantile {
        p: 0.9,
        baseline: None,
        candidate: histogram(2000.0, APP),
        floor: None,
    };
    let max = Bounds {
        ratio: None,
        max: Some(0.5),
    };
    let (verdict, reason, evidence) = decide(&data, max, alpha, ms);
    assert_eq!(
        (verdict, evidence.shown),
        (Verdict::Pass, Shown::NoWorse),
        "{reason}"
    );
}

#[test]
fn queue_times_below_the_floor_compare_as_the_floor() {
    // The baseline queues nothing; the candidate 5–10 ms: noise, not a regression.
    let alpha = per_test_alpha(0.05, 1, 3);
    let none = histogram(3000.0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let some = histogram(3000.0, [0.2, 0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let data = Data::Quantile {
        p: 0.9,
        baseline: Some(none),
        candidate: some,
        floor: Some(0.010),
    };
    let (verdict, reason, _) = decide(&data, P90_10, alpha, ms);
    assert_eq!(verdict, Verdict::Pass, "{reason}");
}

#[test]
fn error_rates_are_compared_on_the_stage_counts() {
    let alpha = per_test_alpha(0.05, 2, 3);
    let both = Bounds {
        ratio: Some(1.5),
        max: Some(0.01),
    };
    let pct = |v: f64| format!("{}%", v * 100.0);
    let worse = Data::Errors(Counts {
        baseline_requests: 5000.0,
        baseline_errors: 10.0,
        candidate_requests: 5000.0,
        candidate_errors: 60.0,
    });
    let (verdict, reason, evidence) = decide(&worse, both, alpha, pct);
    assert_eq!(verdict, Verdict::Fail, "{reason}");
    assert!(
        evidence.ratio_above.is_some_and(|r| r > 1.5),
        "{evidence:?}"
    );
    let same = Data::Errors(Counts {
        baseline_requests: 5000.0,
        baseline_errors: 10.0,
        candidate_requests: 5000.0,
        candidate_errors: 11.0,
    });
    let (verdict, reason, evidence) = decide(&same, both, alpha, pct);
    assert_eq!(verdict, Verdict::Pass, "{reason}");
    assert_eq!(
        evidence.shown,
        Shown::Open,
        "1.5× of 0.2 % is not shown in 5,000"
    );
    let none = Data::Errors(Counts::default());
    assert_eq!(decide(&none, both, alpha, pct).0, Verdict::Inconclusive);
}

/// Answers the bucket queries by label (the candidate twice as slow) and every single-value
/// query with `requests` (a thin interval).
struct Buckets2x {
    requests: f64,
}

impl MetricSource for Buckets2x {
    async fn query_value(&self, _q: &str, _at: Timestamp) -> Result<Option<f64>, PrometheusError> {
        Ok(Some(self.requests))
    }

    async fn query_by_label(
        &self,
        q: &str,
        _at: Timestamp,
        label: &str,
    ) -> Result<Vec<(String, f64)>, PrometheusError> {
        assert_eq!(label, "le");
        assert!(q.contains("increase(") && q.contains("_bucket"), "{q}");
        let candidate = q.contains("candidate");
        let h = histogram(1000.0, if candidate { SLOWER } else { APP });
        Ok(super::fixtures::le_pairs(&h))
    }
}

fn sequential_spec() -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(
        "targetRef: {name: storefront}\n\
         candidate: {server: puma, workers: 2, threads: 4}\n\
         stages: [{weight: 50, duration: 5m}, {weight: 100, duration: 5m}]\n\
         analysis:\n  prometheus: {url: \"http://p:9090\"}\n  interval: 1m\n  judge: sequential\n  \
         minRequests: 50\n  checks: [{metric: latency, quantile: 0.9, maxIncrease: 10%}]\n",
    )
    .unwrap()
}

fn at_stage_one() -> AnalysisContext {
    AnalysisContext {
        stage_index: 0,
        weight: 50,
        ..context(50)
    }
}

#[tokio::test]
async fn a_regression_shown_on_the_stage_fails_even_in_a_thin_interval() {
    let spec = sequential_spec();
    let source = Buckets2x { requests: 10.0 };
    let out = analyse(&source, &spec, &at_stage_one(), &[], &Default::default()).await;
    let check = &out.record.checks[0];
    assert_eq!(check.verdict, Verdict::Fail, "{:?}", check.reason);
    let evidence = check.evidence.as_ref().expect("evidence in status");
    assert_eq!(evidence.shown, Shown::Worse);
    assert_eq!(evidence.candidate_requests, 1000.0);
    assert_eq!(out.record.verdict, Verdict::Fail, "{:?}", out.record.reason);
}

#[tokio::test]
async fn per_interval_judging_is_unchanged_without_the_mode() {
    let mut spec = sequential_spec();
    spec.analysis.judge = crate::api::JudgeMode::PerInterval;
    let source = Buckets2x { requests: 10.0 };
    let out = analyse(&source, &spec, &at_stage_one(), &[], &Default::default()).await;
    assert!(out.record.checks[0].evidence.is_none());
    assert_eq!(out.record.verdict, Verdict::Inconclusive, "thin interval");
}
