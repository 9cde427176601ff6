//! The pre-flight series lookup: which series each check needs, what their absence proves,
//! and the messages — against a source that knows which metric names exist.

use std::collections::BTreeSet;

use jiff::Timestamp;

use super::fixtures::analysis;
use crate::analysis::preflight::{judge, outcome, plan, Finding, Target};
use crate::analysis::{preflight, MetricSource, Preflight, PrometheusError};
use crate::api::Analysis;

/// Answers a lookup `count(last_over_time(NAME{…}[…]…))` with 1 when NAME exists.
struct Series {
    names: BTreeSet<&'static str>,
    down: bool,
}

impl Series {
    fn of(names: &[&'static str]) -> Self {
        Series {
            names: names.iter().copied().collect(),
            down: false,
        }
    }
}

impl MetricSource for Series {
    async fn query_value(
        &self,
        promql: &str,
        _: Timestamp,
    ) -> Result<Option<f64>, PrometheusError> {
        if self.down {
            return Err(PrometheusError::Unreachable("connection refused".into()));
        }
        let inner = promql
            .strip_prefix("count(last_over_time(")
            .or_else(|| promql.strip_prefix("count(max_over_time("))
            .unwrap_or_else(|| panic!("not a lookup: {promql}"));
        let name = &inner[..inner.find('{').unwrap()];
        Ok(self.names.contains(name).then_some(1.0))
    }
}

/// What every scraped yabeda-rails app on Kubernetes has: its request series, cAdvisor's.
const YABEDA_APP: [&str; 6] = [
    "up",
    "rails_requests_total",
    "rails_request_duration_seconds_bucket",
    "rails_request_duration_seconds_count",
    "container_memory_working_set_bytes",
    "container_cpu_usage_seconds_total",
];

fn target() -> Target {
    Target {
        namespace: "shop".into(),
        deployment: "storefront".into(),
        container: "web".into(),
        windows: Default::default(),
    }
}

fn with(checks: &str, extra: &str) -> Analysis {
    let mut a = analysis(checks);
    let more: serde_yaml::Value = serde_yaml::from_str(extra).unwrap();
    let mut v = serde_yaml::to_value(&a).unwrap();
    if let serde_yaml::Value::Mapping(m) = more {
        for (k, val) in m {
            v[k] = val;
        }
    }
    a = serde_yaml::from_value(v).unwrap();
    a
}

async fn run(a: &Analysis, source: &Series) -> Preflight {
    preflight(source, a, &target(), Timestamp::UNIX_EPOCH).await
}

/// The metric names one check's needs look up, per need.
fn needs_of(a: &Analysis, check: &str) -> Vec<Vec<String>> {
    let p = plan(a, &target()).unwrap();
    let c = p.checks.iter().find(|c| c.check == check).unwrap();
    c.needs
        .iter()
        .map(|n| n.any_of.iter().map(|s| s.metric.clone()).collect())
        .collect()
}

/// Per need, the metric names as owned strings.
fn names(v: &[&[&str]]) -> Vec<Vec<String>> {
    v.iter()
        .map(|n| n.iter().map(|m| m.to_string()).collect())
        .collect()
}

#[test]
fn each_builtin_check_looks_up_the_series_it_cannot_do_without() {
    let a = with(
        r#"[{metric: latency, max: 1s}, {metric: memory, max: 1Gi}, {metric: gvlWait, max: "15%"},
            {metric: errorRate, max: "1%"}, {metric: queueTime, max: 50ms}, {metric: backlog, max: 5},
            {metric: threadUtilization, max: "90%"}, {metric: headroom, min: "30%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let s = names;
    assert_eq!(
        needs_of(&a, "latency"),
        s(&[&["rails_request_duration_seconds_bucket"]])
    );
    assert_eq!(
        needs_of(&a, "memory"),
        s(&[&["container_memory_working_set_bytes"]])
    );
    assert_eq!(
        needs_of(&a, "gvlWait"),
        s(&[
            &["ruby_gvl_wait_seconds_total"],
            &["rails_request_duration_seconds_bucket"]
        ])
    );
    // The base counter, not its 5xx series (which a healthy app never has).
    assert_eq!(needs_of(&a, "errorRate"), s(&[&["rails_requests_total"]]));
    assert_eq!(
        needs_of(&a, "queueTime"),
        s(&[&["rack_queue_duration_seconds_bucket"]])
    );
    assert_eq!(needs_of(&a, "backlog"), s(&[&["puma_backlog"]]));
    assert_eq!(
        needs_of(&a, "threadUtilization"),
        s(&[&["puma_max_threads"], &["puma_pool_capacity"]])
    );
    // Headroom and the capacity gate: the request counter and either CPU source — never the
    // GVL-wait or I/O-wait counters.
    let cpu: &[&[&str]] = &[
        &["rails_requests_total"],
        &[
            "ruby_running_seconds_total",
            "container_cpu_usage_seconds_total",
        ],
    ];
    assert_eq!(needs_of(&a, "headroom"), s(cpu));
    assert_eq!(
        needs_of(&a, "capacity gate (maxPredictedUtilization)"),
        s(cpu)
    );
    assert_eq!(needs_of(&a, "minRequests"), s(&[&["rails_requests_total"]]));
    let p = plan(&a, &target()).unwrap();
    let lookups = p.queries().join("\n");
    assert!(!lookups.contains("5.."), "{lookups}");
    assert!(
        lookups.contains(
            r#"count(last_over_time(container_memory_working_set_bytes{namespace="shop",pod=~"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$",container="web"}[1h]))"#
        ),
        "{lookups}"
    );
    assert!(lookups.contains("[58m] offset 2m))"), "{lookups}");
}

#[test]
fn db_pool_wait_and_cpu_utilization_name_their_series_and_who_writes_them() {
    let a = with(
        r#"[{metric: dbPoolWait, max: "5%"}, {metric: cpuUtilization, max: "90%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let s = names;
    assert_eq!(
        needs_of(&a, "dbPoolWait"),
        s(&[
            &["ruby_db_pool_wait_seconds_total"],
            &["rails_request_duration_seconds_bucket"]
        ])
    );
    // The CPU counter, and a limit or a request to divide it by.
    assert_eq!(
        needs_of(&a, "cpuUtilization"),
        s(&[
            &["container_cpu_usage_seconds_total"],
            &["container_spec_cpu_quota", "container_spec_cpu_shares"]
        ])
    );
}

#[test]
fn memory_growth_needs_the_working_set_and_time_to_limit_also_the_limit() {
    let a = with(
        r#"[{metric: memoryGrowth, max: 50Mi}, {metric: timeToLimit, min: 24h}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let ws = vec!["container_memory_working_set_bytes".to_string()];
    assert_eq!(needs_of(&a, "memoryGrowth"), vec![ws.clone()]);
    assert_eq!(
        needs_of(&a, "timeToLimit"),
        vec![ws, vec!["container_spec_memory_limit_bytes".to_string()]]
    );
}

#[test]
fn event_loop_lag_is_not_looked_up_on_a_threaded_target() {
    let a = with(
        r#"[{metric: eventLoopLag, max: "5%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let p = plan(&a, &target()).unwrap();
    assert!(p.checks.iter().all(|c| c.check != "eventLoopLag"));
    assert!(!p.queries().join("\n").contains("event_loop"));
}

#[tokio::test]
async fn a_yabeda_app_without_the_gem_is_told_where_the_pool_counter_comes_from() {
    let a = with(
        r#"[{metric: dbPoolWait, max: "5%"}, {metric: cpuUtilization, max: "90%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let mut names = YABEDA_APP.to_vec();
    names.push("container_spec_cpu_shares");
    let p = run(&a, &Series::of(&names)).await;
    let text = format!("{p:?}");
    assert!(text.contains("ruby_db_pool_wait_seconds_total"), "{text}");
    assert!(text.contains("concurrency-metrics gem"), "{text}");
    assert!(!text.contains("container_spec_cpu_quota"), "{text}");
}

#[test]
fn prometheus_exporter_histograms_may_be_summaries_and_the_gate_off_needs_nothing() {
    let a = with(
        r#"[{metric: latency, max: 1s}]"#,
        "{metrics: {preset: prometheusExporter}, maxPredictedUtilization: \"off\", minRequests: 0}",
    );
    let p = plan(&a, &target()).unwrap();
    let checks: Vec<&str> = p.checks.iter().map(|c| c.check.as_str()).collect();
    assert_eq!(checks, ["latency"]);
    assert_eq!(
        needs_of(&a, "latency"),
        [[
            "ruby_http_request_duration_seconds_bucket".to_string(),
            "ruby_http_request_duration_seconds".to_string()
        ]]
    );
}

#[tokio::test]
async fn a_yabeda_app_passes_without_the_gvl_counters_unless_gvl_wait_is_asked_for() {
    let checks = r#"[{metric: latency, max: 1s}, {metric: memory, maxIncrease: "20%"},
                     {metric: errorRate, max: "1%"}, {metric: headroom, min: "30%"}]"#;
    let a = with(checks, "{metrics: {preset: yabeda}}");
    assert_eq!(run(&a, &Series::of(&YABEDA_APP)).await, Preflight::Passed);

    let a = with(
        r#"[{metric: latency, max: 1s}, {metric: gvlWait, max: "15%"}, {metric: errorRate, max: "1%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let Preflight::Missing(m) = run(&a, &Series::of(&YABEDA_APP)).await else {
        panic!("gvlWait's series never existed");
    };
    for part in [
        "check gvlWait",
        "ruby_gvl_wait_seconds_total",
        "no published gem writes it",
        "the concurrency-metrics gem",
        "add the concurrency-metrics gem to the app",
        "drop the gvlWait",
        "queueTime",
        "backlog",
        "Deployment storefront",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    assert!(!m.contains("errorRate") && !m.contains("latency"), "{m}");
}

#[tokio::test]
async fn nothing_is_refused_before_the_pods_were_scraped_for_a_while() {
    let a = with(
        r#"[{metric: latency, max: 1s}, {metric: gvlWait, max: "15%"}, {metric: memory, max: 1Gi}]"#,
        "{}",
    );
    // Scraped for less than SETTLE: `up` is not there before it; nothing else either.
    let Preflight::Unchecked(m) = run(&a, &Series::of(&[])).await else {
        panic!("nothing decidable yet");
    };
    assert!(
        m.contains("has not scraped the pods of Deployment storefront for 2m"),
        "{m}"
    );
}

#[tokio::test]
async fn series_that_come_with_requests_are_not_judged_before_one_those_at_scrape_are() {
    // Scraped for a while (yabeda creates its label sets with the first request), no request.
    let idle = ["up", "container_cpu_usage_seconds_total"];
    let a = with(
        r#"[{metric: latency, max: 1s}, {metric: errorRate, max: "1%"}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let Preflight::Unchecked(m) = run(&a, &Series::of(&idle)).await else {
        panic!("nothing decidable before a request");
    };
    assert!(m.contains("served no request in the last 1h"), "{m}");
    assert!(
        m.contains("ruby_http_requests_total"),
        "every preset's counter: {m}"
    );
    // cAdvisor's memory is there from the first scrape: its absence is decided at once.
    let a = with(r#"[{metric: memory, max: 1Gi}]"#, "{minRequests: 0}");
    let Preflight::Missing(m) = run(&a, &Series::of(&idle)).await else {
        panic!("memory never existed");
    };
    assert!(m.contains("container_memory_working_set_bytes"), "{m}");
    assert!(m.contains("cAdvisor"), "{m}");
}

#[tokio::test]
async fn a_prometheus_exporter_app_under_yabeda_names_is_told_its_preset() {
    let app = [
        "up",
        "ruby_http_requests_total",
        "ruby_http_request_duration_seconds",
        "ruby_http_request_duration_seconds_count",
        "container_memory_working_set_bytes",
        "container_cpu_usage_seconds_total",
    ];
    let a = with(
        r#"[{metric: latency, max: 1s}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let Preflight::Missing(m) = run(&a, &Series::of(&app)).await else {
        panic!("rails_* never existed");
    };
    assert!(m.contains("rails_request_duration_seconds_bucket"), "{m}");
    assert!(m.contains("preset: prometheusExporter"), "{m}");
    let a = with(
        r#"[{metric: latency, max: 1s}]"#,
        "{metrics: {preset: prometheusExporter}}",
    );
    assert_eq!(run(&a, &Series::of(&app)).await, Preflight::Passed);
}

#[tokio::test]
async fn queue_time_without_the_header_names_the_header_and_backlog() {
    let a = with(
        r#"[{metric: queueTime, max: 50ms}]"#,
        "{metrics: {preset: yabeda}}",
    );
    let Preflight::Missing(m) = run(&a, &Series::of(&YABEDA_APP)).await else {
        panic!("no request carried the header");
    };
    for part in [
        "rack_queue_duration_seconds_bucket",
        "X-Request-Start",
        "backlog",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
}

#[tokio::test]
async fn a_custom_query_needs_its_selectors_names_but_not_their_other_labels() {
    let custom = |q: &str| {
        with(
            &format!("[{{name: mine, query: '{q}', max: 1}}]"),
            "{minRequests: 0, maxPredictedUtilization: \"off\"}",
        )
    };
    let a = custom(r#"max(puma_backlog{namespace="{{namespace}}",pod=~"{{pods}}",worker="0"})"#);
    let p = plan(&a, &target()).unwrap();
    let mine = &p.checks[0].needs;
    assert_eq!(mine.len(), 1);
    let q = &mine[0].any_of[0].query;
    assert!(
        q.starts_with(r#"count(last_over_time(puma_backlog{namespace="shop",pod=~"^storefront-"#),
        "{q}"
    );
    assert!(!q.contains("worker"), "{q}");
    let app = ["up", "rails_requests_total", "puma_backlog"];
    assert_eq!(run(&a, &Series::of(&app)).await, Preflight::Passed);

    let a = custom(r#"max(puma_backlogg{pod=~"{{pods}}"})"#);
    let Preflight::Missing(m) = run(&a, &Series::of(&app)).await else {
        panic!("misspelt");
    };
    assert!(
        m.contains("check mine") && m.contains("puma_backlogg"),
        "{m}"
    );
    assert!(m.contains("spec.analysis.checks[0].query"), "{m}");

    // Absence handled by the query itself: nothing to look up there.
    let a = custom(
        r#"(sum(rate(app_errors_total{pod=~"{{pods}}"}[{{interval}}])) or vector(0)) + absent(foo{pod=~"{{pods}}"})"#,
    );
    assert!(plan(&a, &target()).unwrap().checks.is_empty());
}

#[tokio::test]
async fn prometheus_down_is_unavailable_never_missing() {
    let a = with(r#"[{metric: latency, max: 1s}]"#, "{}");
    let down = Series {
        down: true,
        ..Series::of(&[])
    };
    let Preflight::Unavailable(m) = run(&a, &down).await else {
        panic!("an error is no answer");
    };
    assert!(m.contains("PrometheusUnreachable"), "{m}");
}

#[test]
fn one_missing_check_refuses_and_undecided_ones_are_noted() {
    let f = |s: &str| (s.to_string(), Finding::Missing(format!("{s} gone")));
    let u = |s: &str| (s.to_string(), Finding::Unknown("later".into()));
    let ok = |s: &str| (s.to_string(), Finding::Found);
    assert_eq!(outcome(&[ok("a"), ok("b")]), Preflight::Passed);
    assert_eq!(
        outcome(&[ok("a"), u("b")]),
        Preflight::Unchecked("check b: later".into())
    );
    assert_eq!(
        outcome(&[u("a"), f("b"), f("c")]),
        Preflight::Missing("check b: b gone. check c: c gone".into())
    );
    // The same series missing for several checks: named once, with every check.
    let same = |s: &str| (s.to_string(), Finding::Missing("x_total gone".into()));
    assert_eq!(
        outcome(&[same("minRequests"), same("errorRate"), f("b")]),
        Preflight::Missing("checks minRequests, errorRate: x_total gone. check b: b gone".into())
    );
    assert_eq!(
        outcome(&[u("a"), u("b")]),
        Preflight::Unchecked("checks a, b: later".into())
    );
    // `judge` keeps the plan's order, one finding per check.
    let a = with(
        r#"[{metric: latency, max: 1s}]"#,
        "{minRequests: 0, maxPredictedUtilization: \"off\"}",
    );
    let p = plan(&a, &target()).unwrap();
    let found = p.queries().into_iter().map(|q| (q, true)).collect();
    assert_eq!(
        judge(&p, &found, None),
        [("latency".to_string(), Finding::Found)]
    );
}
