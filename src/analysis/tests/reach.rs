//! Whether the stages reach the data the checks need at a request rate (`analysis::reach`).

use crate::analysis::reach::{notes, Plan};
use crate::analysis::sequential::{per_test_alpha, Direction, QuantileTest, N_OPT};
use crate::api::{Analysis, Stage};

fn analysis(judge: &str, checks: serde_json::Value) -> Analysis {
    serde_json::from_value(serde_json::json!({
        "prometheus": {"url": "http://prometheus:9090"},
        "interval": "1m", "minRequests": 50, "judge": judge, "checks": checks,
    }))
    .unwrap()
}

fn stages(minutes: &[(i32, u32)]) -> Vec<Stage> {
    minutes
        .iter()
        .map(|(w, m)| Stage {
            weight: *w,
            duration: format!("{m}m"),
        })
        .collect()
}

#[test]
fn per_interval_a_quantile_needs_ten_requests_above_it_and_every_analysis_min_requests() {
    let a = analysis(
        "perInterval",
        serde_json::json!([
            {"metric": "latency", "quantile": 0.99, "maxIncrease": "10%"},
            {"metric": "latency", "name": "p50", "quantile": 0.5, "maxIncrease": "10%"},
            // A fixed max does not compare two tails of one interval: not warned about.
            {"metric": "queueTime", "quantile": 0.99, "max": "50ms"},
        ]),
    );
    let s = stages(&[(30, 10), (70, 10), (100, 10)]);
    let plan = Plan {
        analysis: &a,
        stages: &s,
    };
    // 2 req/s: 36 per variant per minute at 30 %: below minRequests, and p99 needs 1,000;
    // p50 needs 20, reached.
    let n = notes(&plan, 2.0);
    assert_eq!(n.len(), 2, "{n:#?}");
    assert!(n[0].starts_with("At the target's 2 req/s, stage 1 (30%) brings about 36 requests per variant per 1m interval, fewer than minRequests 50"), "{}", n[0]);
    assert!(n[1].contains("a p99 per interval rests on the requests above it; at 2 req/s stage 1 brings about 36 per variant per 1m interval, so one slow request moves it (1000 would put 10 above it)"), "{}", n[1]);
    // At 56 req/s stage 1 brings 1,008 per variant: nothing to say.
    assert!(notes(&plan, 56.0).is_empty(), "{:#?}", notes(&plan, 56.0));
    // The smaller share counts: at 70 % the baseline's 30 %.
    let s = stages(&[(70, 10)]);
    let n = notes(
        &Plan {
            analysis: &a,
            stages: &s,
        },
        2.0,
    );
    assert!(n[0].contains("about 36 requests per variant"), "{n:#?}");
}

#[test]
fn sequential_a_stage_short_of_the_tests_minimum_is_named() {
    let a = analysis(
        "sequential",
        serde_json::json!([{"metric": "latency", "quantile": 0.99, "maxIncrease": "10%"}]),
    );
    let s = stages(&[(30, 10), (70, 10), (100, 10)]);
    let plan = Plan {
        analysis: &a,
        stages: &s,
    };
    // The level each test gets: 5 % over 1 test and 3 stages.
    let needed = QuantileTest::new(0.99, N_OPT)
        .minimum_requests(per_test_alpha(0.05, 1, 3), Direction::Worse)
        .ceil();
    assert!(needed > 100.0 && needed < 2000.0, "{needed}");
    // A rate at which stage 1 (30 %, 600 s) falls short and stage 3 (100 %) does not.
    let rate = needed / 300.0;
    let n = notes(&plan, rate);
    assert_eq!(n.len(), 1, "{n:#?}");
    assert!(
        n[0].starts_with(&format!(
            "Check latency: its p99 shows nothing before {needed} requests per variant in a stage"
        )),
        "{}",
        n[0]
    );
    assert!(n[0].contains("stage 1 (30%"), "{}", n[0]);
    assert!(n[0].contains("stage 2 (70%"), "{}", n[0]);
    assert!(!n[0].contains("stage 3"), "{}", n[0]);
    // Enough traffic: nothing.
    assert!(notes(&plan, needed).is_empty());
}

/// Answers every query with `answer`, keeping what it was asked.
struct Recording {
    /// `None`: Prometheus unreachable.
    answer: Option<Option<f64>>,
    asked: std::sync::Mutex<Vec<String>>,
}

impl crate::analysis::MetricSource for Recording {
    async fn query_value(
        &self,
        promql: &str,
        _: jiff::Timestamp,
    ) -> Result<Option<f64>, crate::analysis::PrometheusError> {
        self.asked.lock().unwrap().push(promql.to_string());
        self.answer
            .ok_or_else(|| crate::analysis::PrometheusError::Unreachable("refused".into()))
    }
}

#[tokio::test]
async fn the_operator_measures_the_targets_rate_over_its_pods_in_the_last_five_minutes() {
    use crate::analysis::preflight::{target_rate, Target};
    let target = Target {
        namespace: "shop".into(),
        deployment: "storefront".into(),
        container: "web".into(),
        windows: Default::default(),
    };
    let a = analysis("perInterval", serde_json::json!([]));
    let at = "2026-12-01T00:00:00Z".parse().unwrap();
    let source = |answer| Recording {
        answer,
        asked: Default::default(),
    };
    let s = source(Some(Some(12.5)));
    assert_eq!(target_rate(&s, &a, &target, at).await, Some(12.5));
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].starts_with("sum(rate(rails_requests_total{")
            && asked[0].contains(r#"namespace="shop""#)
            && asked[0].contains("^storefront-")
            && asked[0].contains("[5m]))")
            // Only from a counter that existed 5 minutes ago: rate() divides by the window.
            && asked[0].contains(" and on() (count(rails_requests_total{namespace=\"shop\",")
            && asked[0].ends_with("} offset 5m) > 0)"),
        "{}",
        asked[0]
    );
    promql_parser::parser::parse(&asked[0]).expect("valid PromQL");
    // No answer, NaN (0/0) or an error: nothing to warn on.
    for answer in [Some(None), Some(Some(f64::NAN)), None] {
        assert_eq!(target_rate(&source(answer), &a, &target, at).await, None);
    }
}
