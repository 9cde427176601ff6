//! The operator-wide metrics: names, labels, suffixes and resets as scraped.

use crate::api::BuiltinMetric;
use crate::api::Phase;
use crate::api::Verdict;
use crate::telemetry::metrics::*;
use std::time::Duration;

fn line_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn phase_gauge_counts_and_resets() {
    let m = Metrics::new();
    m.set_experiment_phases([Phase::Progressing, Phase::Progressing, Phase::Paused]);
    let text = m.encode();
    assert_eq!(
        line_value(&text, r#"concurrency_experiments{phase="Progressing"}"#),
        Some(2.0)
    );
    assert_eq!(
        line_value(&text, r#"concurrency_experiments{phase="Paused"}"#),
        Some(1.0)
    );
    assert_eq!(
        line_value(&text, r#"concurrency_experiments{phase="Succeeded"}"#),
        Some(0.0)
    );

    m.set_experiment_phases([Phase::Succeeded]);
    let text = m.encode();
    assert_eq!(
        line_value(&text, r#"concurrency_experiments{phase="Progressing"}"#),
        Some(0.0)
    );
    assert_eq!(
        line_value(&text, r#"concurrency_experiments{phase="Succeeded"}"#),
        Some(1.0)
    );
}

#[test]
fn counters_have_total_suffix_and_labels() {
    let m = Metrics::new();
    m.record_analysis(Verdict::Pass);
    m.record_analysis(Verdict::Pass);
    m.record_analysis(Verdict::Inconclusive);
    m.record_check_result(Some(BuiltinMetric::GvlWait), Verdict::Fail);
    m.record_check_result(None, Verdict::Pass);
    m.record_rollback("CheckFailed");
    m.record_promotion();
    m.record_reconcile_error("Kube");
    let text = m.encode();

    assert_eq!(
        line_value(&text, r#"concurrency_analyses_total{verdict="Pass"}"#),
        Some(2.0)
    );
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_analyses_total{verdict="Inconclusive"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_check_results_total{check_kind="gvlWait",verdict="Fail"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_check_results_total{check_kind="custom",verdict="Pass"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_rollbacks_total{reason="CheckFailed"}"#
        ),
        Some(1.0)
    );
    assert_eq!(line_value(&text, "concurrency_promotions_total"), Some(1.0));
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_reconcile_errors_total{category="Kube"}"#
        ),
        Some(1.0)
    );
    assert!(text.contains("# TYPE concurrency_analyses counter"));
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn names_never_become_labels() {
    let m = Metrics::new();
    m.record_rollback("storefront-puma-2x4");
    m.record_rollback("rolled back because p99 rose 30%");
    m.record_reconcile_error("");
    let text = m.encode();
    assert_eq!(
        line_value(&text, r#"concurrency_rollbacks_total{reason="Other"}"#),
        Some(2.0)
    );
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_reconcile_errors_total{category="Other"}"#
        ),
        Some(1.0)
    );
    assert!(!text.contains("storefront"));
}

#[test]
fn histograms_and_leader_gauge() {
    let m = Metrics::new();
    m.observe_reconcile(Duration::from_millis(3));
    m.observe_reconcile(Duration::from_millis(40));
    m.observe_prometheus_query(Duration::from_millis(20));
    m.set_leader(true);
    let text = m.encode();
    assert_eq!(
        line_value(&text, "concurrency_reconcile_duration_seconds_count"),
        Some(2.0)
    );
    let sum = line_value(&text, "concurrency_reconcile_duration_seconds_sum").unwrap();
    assert!((sum - 0.043).abs() < 1e-9, "sum {sum}");
    // 3 ms lands in the 4 ms bucket, 40 ms does not.
    assert_eq!(
        line_value(
            &text,
            r#"concurrency_reconcile_duration_seconds_bucket{le="0.004"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        line_value(&text, "concurrency_prometheus_query_duration_seconds_count"),
        Some(1.0)
    );
    assert_eq!(line_value(&text, "concurrency_leader"), Some(1.0));
    m.set_leader(false);
    assert_eq!(line_value(&m.encode(), "concurrency_leader"), Some(0.0));
}

#[test]
fn clones_share_series() {
    let m = Metrics::new();
    let c = m.clone();
    c.record_promotion();
    assert_eq!(
        line_value(&m.encode(), "concurrency_promotions_total"),
        Some(1.0)
    );
}
