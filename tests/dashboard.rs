//! The Grafana dashboard shipped with the chart: valid JSON, and every PromQL expression asks
//! only for metrics the operator exports (names taken from `Metrics::encode()`), and every
//! exported metric family is on it.

use std::collections::BTreeSet;

use std::time::Duration;

use concurrency_operator::api::{BuiltinMetric, ConcurrencyExperimentStatus, Phase, Verdict};
use concurrency_operator::telemetry::Metrics;
use regex::Regex;
use serde_json::Value;

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/charts/concurrency-operator/dashboards/concurrency-operator.json"
);

/// Series names a scrape can contain, from the `# TYPE` lines of an operator that has done
/// everything once (a family without series is not encoded at all): counters get `_total`,
/// histograms their three series.
fn exported() -> BTreeSet<String> {
    let m = Metrics::new();
    m.set_experiment_phases([Phase::Progressing]);
    m.record_analysis(Verdict::Pass);
    m.record_check_result(Some(BuiltinMetric::Latency), Verdict::Pass);
    m.record_rollback("CheckFailed");
    m.record_promotion();
    m.observe_reconcile(Duration::from_millis(5));
    m.record_reconcile_error("Kube");
    m.observe_prometheus_query(Duration::from_millis(5));
    m.set_leader(true);
    m.record_notification("webhook", "sent");
    let status: ConcurrencyExperimentStatus = serde_json::from_value(serde_json::json!({
        "phase": "Progressing", "stageIndex": 0, "plannedWeight": 30, "effectiveWeight": 33,
        "analyses": [{"at": "2026-11-30T01:00:00Z", "stageIndex": 0, "weight": 33,
            "verdict": "Pass", "checks": [{"name": "latency", "query": "q", "limit": "l",
            "verdict": "Pass", "baseline": 0.2, "candidate": 0.21}]}],
    }))
    .unwrap();
    m.set_experiment("shop", "storefront", &status);
    let text = m.encode();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            "gauge" => {
                names.insert(name.to_string());
            }
            other => panic!("unexpected metric type {other} for {name}"),
        }
    }
    names
}

/// Metric names in a PromQL expression: identifiers left once strings, label matchers,
/// ranges, grouping clauses and Grafana variables are gone, that are not a function call or a
/// keyword.
fn metric_names(expr: &str) -> Vec<String> {
    let mut e = expr.to_string();
    for pattern in [
        r#""(?:[^"\\]|\\.)*""#,
        r"\{[^}]*\}",
        r"\[[^\]]*\]",
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
        r"\$\{?\w+\}?",
    ] {
        e = Regex::new(pattern)
            .unwrap()
            .replace_all(&e, " ")
            .into_owned();
    }
    let keywords = ["and", "or", "unless", "bool", "offset"];
    let ident = Regex::new(r"[a-zA-Z_:][a-zA-Z0-9_:]*").unwrap();
    ident
        .find_iter(&e)
        .filter(|m| !e[m.end()..].trim_start().starts_with('('))
        .filter(|m| !keywords.contains(&m.as_str()))
        // Exponents of numbers such as 1e3.
        .filter(|m| {
            !e[..m.start()]
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_digit() || c == '.')
        })
        .map(|m| m.as_str().to_string())
        .collect()
}

/// Every PromQL expression of the dashboard: panel targets and template-variable queries
/// (`label_values(<expr>, label)`).
fn expressions(dashboard: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(expr)) = map.get("expr") {
                    out.push(expr.clone());
                }
                for v in map.values() {
                    walk(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    let label_values = Regex::new(r"^label_values\((.+),\s*\w+\)$").unwrap();
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"].as_str().unwrap();
        let inner = label_values
            .captures(query)
            .unwrap_or_else(|| panic!("variable query is not label_values(expr, label): {query}"));
        out.push(inner[1].to_string());
    }
    out
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(DASHBOARD).unwrap();
    serde_json::from_str(&text).expect("the dashboard is valid JSON")
}

#[test]
fn the_extractor_finds_metric_names_only() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(a_bucket{x=~"$v", y!="b c"}[$__rate_interval]))) / on (pod) b_total + 1e3"#
        ),
        ["a_bucket", "b_total"]
    );
    assert_eq!(
        metric_names(r#"max by (phase) (c) == 1 and d offset 5m"#),
        ["c", "d"]
    );
}

#[test]
fn every_expression_uses_only_exported_metrics() {
    let exported = exported();
    assert!(exported.contains("concurrency_analyses_total"));
    assert!(exported.contains("concurrency_experiment_check_value"));
    let dashboard = dashboard();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() > 10, "{exprs:?}");
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no metric in {expr}");
        for name in names {
            assert!(
                exported.contains(&name),
                "{name} (in `{expr}`) is not exported by the operator; exported: {exported:?}"
            );
            used.insert(name);
        }
    }
    // Every family is shown somewhere (a histogram counts through any of its series).
    let family = |n: &str| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| n.strip_suffix(s).filter(|_| n.contains("_seconds")))
            .unwrap_or(n)
            .to_string()
    };
    let shown: BTreeSet<String> = used.iter().map(|n| family(n)).collect();
    let missing: Vec<String> = exported
        .iter()
        .map(|n| family(n))
        .filter(|f| !shown.contains(f))
        .collect();
    assert!(missing.is_empty(), "not on the dashboard: {missing:?}");
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_with_namespace_and_experiment_variables() {
    let d = dashboard();
    assert!(d["schemaVersion"].as_u64().unwrap() >= 36);
    assert_eq!(d["uid"], "concurrency-operator");
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "namespace", "experiment"]);
    let mut ids = BTreeSet::new();
    for panel in d["panels"].as_array().unwrap() {
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "duplicate id");
        let grid = &panel["gridPos"];
        assert!(grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24);
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            // Per-experiment panels follow the variables.
            if expr.contains("concurrency_experiment_") {
                assert!(
                    expr.contains(r#"namespace=~"$namespace", experiment=~"$experiment""#),
                    "{expr}"
                );
            }
        }
    }
}
