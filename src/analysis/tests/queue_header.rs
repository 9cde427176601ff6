//! `queueTime` and the load balancer's clock: a one-second stamp told from the histogram's
//! shape, said in the check's reason, and not mistaken for an app that queues or one that
//! does not.

use jiff::Timestamp;

use crate::analysis::queue_header::{one_second_clock, CLOCK_MIN_REQUESTS};
use crate::analysis::sequential::Buckets;
use crate::analysis::{analyse, AnalysisContext, MetricSource, PrometheusError};
use crate::api::{ConcurrencyExperimentSpec, Verdict};

use super::fixtures::context;

/// yabeda-rack-queue's buckets (and the Rails app's).
const YABEDA: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// The reference images' buckets.
const REFERENCE: [f64; 17] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 7.5,
    10.0,
];

/// `n` queue times with the distribution function `cdf`, read at `bounds`.
fn histogram(bounds: &[f64], n: f64, cdf: impl Fn(f64) -> f64) -> Buckets {
    let pairs = bounds
        .iter()
        .map(|le| (*le, (n * cdf(*le)).round()))
        .chain([(f64::INFINITY, n)])
        .collect();
    Buckets::from_pairs(pairs)
}

/// Arrivals stamped in whole seconds: the real queue time `real` plus a uniform 0–1 s.
fn one_second(real: f64) -> impl Fn(f64) -> f64 {
    move |x| (x - real).clamp(0.0, 1.0)
}

#[test]
fn whole_second_stamps_are_told_on_either_bucket_layout() {
    for bounds in [&YABEDA[..], &REFERENCE[..]] {
        for real in [0.0, 0.002, 0.03] {
            let clock = one_second_clock(&histogram(bounds, 2000.0, one_second(real)))
                .unwrap_or_else(|| panic!("{bounds:?} real {real}"));
            assert_eq!(clock.requests, 2000.0);
            let at = |le: f64| clock.shares.iter().find(|(b, _)| *b == le).map(|s| s.1);
            assert!(at(0.1).is_some_and(|s| s < 0.15), "{clock:?}");
            assert!(
                at(0.5).is_some_and(|s| (0.4..0.55).contains(&s)),
                "{clock:?}"
            );
            let text = clock.describe();
            assert!(
                text.starts_with("queue time looks like a one-second clock (")
                    && text.contains("≤ 100 ms")
                    && text.contains("≤ 500 ms")
                    && text.contains("X-Amzn-Trace-Id")
                    && text.contains("backlog"),
                "{text}"
            );
        }
    }
}

#[test]
fn real_queues_are_not_taken_for_the_clock() {
    type Cdf = Box<dyn Fn(f64) -> f64>;
    let cases: [(&str, Cdf); 5] = [
        // A healthy app: nearly everything under 5 ms.
        ("no queueing", Box::new(|x: f64| (x / 0.005).min(1.0))),
        // Overloaded: exponential queue times with a 500 ms mean (86 % under 1 s).
        (
            "exponential 500ms",
            Box::new(|x: f64| 1.0 - (-x / 0.5).exp()),
        ),
        // Overloaded: exponential with a 300 ms mean — shaped nothing like a uniform low end.
        (
            "exponential 300ms",
            Box::new(|x: f64| 1.0 - (-x / 0.3).exp()),
        ),
        // Everything waits 1–3 s.
        ("slow", Box::new(|x: f64| ((x - 1.0) / 2.0).clamp(0.0, 1.0))),
        // A clock rounded to the nearest second: half at 0, the rest up to 500 ms.
        ("rounded", Box::new(|x: f64| (0.5 + x).min(1.0))),
    ];
    for (name, cdf) in cases {
        for bounds in [&YABEDA[..], &REFERENCE[..]] {
            assert_eq!(
                one_second_clock(&histogram(bounds, 5000.0, &cdf)),
                None,
                "{name} on {bounds:?}"
            );
        }
    }
}

#[test]
fn too_few_requests_or_too_few_bounds_say_nothing() {
    let few = histogram(&YABEDA, CLOCK_MIN_REQUESTS - 1.0, one_second(0.0));
    assert_eq!(one_second_clock(&few), None);
    // No bound between 200 and 800 ms: a uniform low end cannot be told from a slow app.
    let coarse_buckets = [0.001, 0.01, 0.1, 1.0, 10.0];
    assert_eq!(
        one_second_clock(&histogram(&coarse_buckets, 5000.0, one_second(0.0))),
        None
    );
    assert_eq!(one_second_clock(&Buckets::default()), None);
}

/// Answers queueTime's p90 (`histogram_quantile`) with 0.9 s, requests with `requests`, and the
/// bucket query with whole-second stamps (or a healthy app's).
struct Source {
    clock: bool,
}

impl MetricSource for Source {
    async fn query_value(&self, q: &str, _at: Timestamp) -> Result<Option<f64>, PrometheusError> {
        Ok(Some(if q.contains("histogram_quantile") {
            0.9
        } else {
            3000.0
        }))
    }

    async fn query_by_label(
        &self,
        q: &str,
        _at: Timestamp,
        label: &str,
    ) -> Result<Vec<(String, f64)>, PrometheusError> {
        assert_eq!(label, "le");
        assert!(q.contains("rails_request_queue_time_seconds_bucket"), "{q}");
        assert!(
            q.contains("storefront-candidate") && q.contains("storefront"),
            "both variants: {q}"
        );
        let h = if self.clock {
            histogram(&REFERENCE, 6000.0, one_second(0.001))
        } else {
            histogram(&REFERENCE, 6000.0, |x| (x / 0.005).min(1.0))
        };
        Ok(super::fixtures::le_pairs(&h))
    }
}

fn spec() -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(
        "targetRef: {name: storefront}\n\
         candidate: {server: puma, workers: 2, threads: 4}\n\
         stages: [{weight: 50, duration: 5m}, {weight: 100, duration: 5m}]\n\
         analysis:\n  prometheus: {url: \"http://p:9090\"}\n  interval: 1m\n  \
         minRequests: 50\n  checks:\n  - {metric: queueTime, quantile: 0.9, maxIncrease: 50%}\n  \
         - {metric: latency, quantile: 0.9, maxIncrease: 10%}\n",
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
async fn the_queue_time_check_says_its_clock_is_one_second_and_keeps_its_verdict() {
    let out = analyse(
        &Source { clock: true },
        &spec(),
        &at_stage_one(),
        &[],
        &Default::default(),
    )
    .await;
    let queue = &out.record.checks[0];
    let reason = queue.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("one-second clock (") && reason.contains("judge backlog instead; "),
        "first, before the verdict's reason, which status may cut: {reason}"
    );
    let clock = reason.split("; ").next().unwrap_or_default();
    assert!(
        clock.len() <= crate::api::CHECK_REASON_BYTES / 2,
        "{} bytes: {clock}",
        clock.len()
    );
    assert_eq!(
        queue.verdict,
        Verdict::Pass,
        "the same 0.9 s on both: {reason}"
    );
    let latency = &out.record.checks[1];
    assert!(
        !latency.reason.clone().unwrap_or_default().contains("clock"),
        "only queueTime: {:?}",
        latency.reason
    );
}

#[tokio::test]
async fn a_millisecond_clock_adds_nothing() {
    let out = analyse(
        &Source { clock: false },
        &spec(),
        &at_stage_one(),
        &[],
        &Default::default(),
    )
    .await;
    let reason = out.record.checks[0].reason.clone().unwrap_or_default();
    assert!(!reason.contains("clock"), "{reason}");
}
