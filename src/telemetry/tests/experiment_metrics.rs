use crate::api::ConcurrencyExperimentStatus;
use serde_json::json;

use crate::telemetry::experiment_metrics::*;
use crate::telemetry::Metrics;

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn status(v: serde_json::Value) -> ConcurrencyExperimentStatus {
    serde_json::from_value(v).unwrap()
}

const EXP: &str = r#"namespace="shop",experiment="storefront""#;

fn progressing() -> ConcurrencyExperimentStatus {
    status(json!({
        "phase": "Progressing", "stageIndex": 1, "plannedWeight": 70, "effectiveWeight": 67,
        "failedAnalyses": 1, "inconclusiveAnalyses": 2,
        "analyses": [
            {"at": "2026-11-30T01:00:00Z", "stageIndex": 0, "weight": 33, "verdict": "Pass",
             "checks": [{"name": "memory", "query": "q", "limit": "l", "verdict": "Pass",
                         "baseline": 1.0, "candidate": 2.0}]},
            {"at": "2026-11-30T01:01:00Z", "stageIndex": 1, "weight": 67, "verdict": "Fail",
             "checks": [
                {"name": "latency", "query": "q", "limit": "l", "verdict": "Fail",
                 "baseline": 0.25, "candidate": 0.5},
                {"name": "backlog", "query": "q", "limit": "l", "verdict": "Inconclusive",
                 "baseline": 3.0},
             ]},
        ],
    }))
}

#[test]
fn gauges_follow_the_status() {
    let m = Metrics::new();
    m.set_experiment("shop", "storefront", &progressing());
    let text = m.encode();
    let at = |name: &str, extra: &str| value(&text, &format!("{name}{{{EXP}{extra}}}"));
    assert_eq!(at("concurrency_experiment_stage_index", ""), Some(1.0));
    assert_eq!(
        at("concurrency_experiment_weight", r#",kind="planned""#),
        Some(70.0)
    );
    assert_eq!(
        at("concurrency_experiment_weight", r#",kind="effective""#),
        Some(67.0)
    );
    assert_eq!(
        at("concurrency_experiment_phase", r#",phase="Progressing""#),
        Some(1.0)
    );
    assert_eq!(at("concurrency_experiment_failed_analyses", ""), Some(1.0));
    assert_eq!(
        at("concurrency_experiment_inconclusive_analyses", ""),
        Some(2.0)
    );
    // The latest analysis only; a missing value has no series.
    let check = |c: &str, v: &str| {
        at(
            "concurrency_experiment_check_value",
            &format!(r#",check="{c}",variant="{v}""#),
        )
    };
    assert_eq!(check("latency", "baseline"), Some(0.25));
    assert_eq!(check("latency", "candidate"), Some(0.5));
    assert_eq!(check("backlog", "baseline"), Some(3.0));
    assert_eq!(check("backlog", "candidate"), None);
    assert_eq!(check("memory", "baseline"), None);
    assert!(text.contains("# TYPE concurrency_experiment_check_value gauge"));
}

#[test]
fn analyses_are_counted_by_verdict_from_zero() {
    let m = Metrics::new();
    m.set_experiment("shop", "storefront", &progressing());
    let count = |m: &Metrics, verdict: &str| {
        value(
            &m.encode(),
            &format!(r#"concurrency_experiment_analyses_total{{{EXP},verdict="{verdict}"}}"#),
        )
    };
    // Before any analysis each verdict is exported at 0: the first one is a rise, not a
    // series that appears at 1 (which a report could not tell from one that always was).
    for verdict in ["Pass", "Fail", "Inconclusive"] {
        assert_eq!(count(&m, verdict), Some(0.0), "{verdict}");
    }
    m.count_experiment_analysis("shop", "storefront", crate::api::Verdict::Fail);
    m.count_experiment_analysis("shop", "storefront", crate::api::Verdict::Fail);
    m.count_experiment_analysis("shop", "storefront", crate::api::Verdict::Pass);
    assert_eq!(count(&m, "Fail"), Some(2.0));
    assert_eq!(count(&m, "Pass"), Some(1.0));
    assert_eq!(count(&m, "Inconclusive"), Some(0.0));
    // A later status does not reset the counts (status' own counts reset on retry).
    m.set_experiment("shop", "storefront", &progressing());
    assert_eq!(count(&m, "Fail"), Some(2.0));
    m.remove_experiment("shop", "storefront");
    assert!(!m
        .encode()
        .contains("concurrency_experiment_analyses_total{"));
}

#[test]
fn an_update_drops_the_old_phase_and_checks() {
    let m = Metrics::new();
    m.set_experiment("shop", "storefront", &progressing());
    let mut next = progressing();
    next.phase = crate::api::Phase::RollingBack;
    next.analyses.last_mut().unwrap().checks.truncate(1);
    next.stage_index = None;
    m.set_experiment("shop", "storefront", &next);
    let text = m.encode();
    assert!(!text.contains(r#"phase="Progressing""#), "{text}");
    assert_eq!(
        value(
            &text,
            &format!(r#"concurrency_experiment_phase{{{EXP},phase="RollingBack"}}"#)
        ),
        Some(1.0)
    );
    assert!(!text.contains(r#"check="backlog""#), "{text}");
    assert!(text.contains(r#"check="latency""#));
    assert!(!text.contains("concurrency_experiment_stage_index{"));
}

#[test]
fn remove_and_retain_drop_every_series_of_an_experiment() {
    let m = Metrics::new();
    m.set_experiment("shop", "storefront", &progressing());
    m.set_experiment("shop", "checkout", &progressing());
    m.set_experiment("billing", "storefront", &progressing());
    m.remove_experiment("shop", "storefront");
    let text = m.encode();
    assert!(!text.contains(EXP), "{text}");
    assert!(text.contains(r#"namespace="shop",experiment="checkout""#));

    m.retain_experiments(|ns, name| ns == "billing" && name == "storefront");
    let text = m.encode();
    assert!(!text.contains(r#"experiment="checkout""#), "{text}");
    assert!(text.contains(r#"namespace="billing",experiment="storefront""#));
    assert_eq!(
        value(
            &text,
            r#"concurrency_experiment_stage_index{namespace="billing",experiment="storefront"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn finished_experiments_keep_series_only_for_the_retention() {
    let now: jiff::Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    assert!(keeps_series(&progressing(), now));
    let decided = |at: &str| {
        status(json!({"phase": "RolledBack", "decision": {
            "action": "Rollback", "reason": "CheckFailed", "message": "m", "at": at}}))
    };
    assert!(keeps_series(&decided("2026-11-30T07:00:00Z"), now));
    assert!(!keeps_series(&decided("2026-11-30T05:59:00Z"), now));
    let invalid = status(json!({"phase": "Invalid", "conditions": [{
        "type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "m",
        "lastTransitionTime": "2026-11-29T01:00:00Z"}]}));
    assert!(!keeps_series(&invalid, now));
    // A finished status without any time is kept rather than guessed about.
    assert!(keeps_series(&status(json!({"phase": "Succeeded"})), now));
}
