//! Exporter presets: the names each one resolves to, overrides, and the Puma checks' queries.

use crate::analysis::queries::*;
use crate::api::{BuiltinMetric, MetricNames, MetricPreset, MetricsSpec};

const SEL: &str = r#"{namespace="{{namespace}}",pod=~"{{pods}}"}"#;

fn spec(yaml: &str) -> MetricsSpec {
    serde_yaml::from_str(yaml).unwrap()
}

#[test]
fn no_preset_keeps_the_names_used_before_presets() {
    let n = spec("{}").resolve();
    assert_eq!(n, MetricNames::of(MetricPreset::ReferenceApp));
    assert_eq!(n, spec("{preset: referenceApp}").resolve());
    let old = [
        (&n.request_duration, "rails_request_duration_seconds"),
        (&n.requests_total, "rails_requests_total"),
        (&n.status_label, "status"),
        (&n.gvl_wait_seconds, "ruby_gvl_wait_seconds_total"),
        (&n.io_wait_seconds, "ruby_io_wait_seconds_total"),
        (&n.running_seconds, "ruby_running_seconds_total"),
        (&n.queue_time, "rails_request_queue_time_seconds"),
        (&n.memory, "container_memory_working_set_bytes"),
    ];
    for (got, want) in old {
        assert_eq!(got, want);
    }
    assert_eq!(n.busy_threads, None);
    assert!(!n.may_be_summaries);
}

#[test]
fn yabeda_names_are_group_name_unit() {
    let n = spec("{preset: yabeda}").resolve();
    assert_eq!(n.request_duration, "rails_request_duration_seconds");
    assert_eq!(n.requests_total, "rails_requests_total");
    assert_eq!(n.queue_time, "rack_queue_duration_seconds");
    assert_eq!(n.backlog, "puma_backlog");
    assert_eq!(n.busy_threads.as_deref(), Some("puma_busy_threads"));
    assert_eq!(n.pool_capacity, "puma_pool_capacity");
    assert_eq!(n.max_threads, "puma_max_threads");
    assert!(!n.may_be_summaries);
}

#[test]
fn prometheus_exporter_names_carry_the_ruby_prefix_and_may_be_summaries() {
    let n = spec("{preset: prometheusExporter}").resolve();
    assert_eq!(n.request_duration, "ruby_http_request_duration_seconds");
    assert_eq!(n.requests_total, "ruby_http_requests_total");
    assert_eq!(n.status_label, "status");
    assert_eq!(n.queue_time, "ruby_http_request_queue_duration_seconds");
    assert_eq!(n.backlog, "ruby_puma_request_backlog");
    assert_eq!(n.busy_threads.as_deref(), Some("ruby_puma_busy_threads"));
    assert_eq!(n.pool_capacity, "ruby_puma_thread_pool_capacity");
    assert_eq!(n.max_threads, "ruby_puma_max_threads");
    assert!(n.may_be_summaries);
}

#[test]
fn explicit_names_override_the_preset() {
    let n = spec(
        "{preset: prometheusExporter, requestsTotal: app_requests_total, busyThreads: app_busy}",
    )
    .resolve();
    assert_eq!(n.requests_total, "app_requests_total");
    assert_eq!(n.busy_threads.as_deref(), Some("app_busy"));
    // The rest stays the preset's.
    assert_eq!(n.request_duration, "ruby_http_request_duration_seconds");
    assert!(n.may_be_summaries);
    let n = spec("{queueTime: lb_queue_seconds}").resolve();
    assert_eq!(n.queue_time, "lb_queue_seconds");
    assert_eq!(n.backlog, "puma_backlog");
}

#[test]
fn an_unknown_preset_is_refused_by_name() {
    let e = serde_yaml::from_str::<MetricsSpec>("{preset: yabedaRails}").unwrap_err();
    assert!(e.to_string().contains("preset"), "{e}");
    assert!(e.to_string().contains("prometheusExporter"), "{e}");
}

#[test]
fn backlog_is_the_average_pod_backlog_over_the_interval() {
    let n = spec("{preset: prometheusExporter}").resolve();
    assert_eq!(
        builtin_template(BuiltinMetric::Backlog, None, &n).unwrap(),
        format!(
            "avg(sum by (pod) (avg_over_time(ruby_puma_request_backlog{SEL}[{{{{interval}}}}])))"
        )
    );
}

#[test]
fn thread_utilization_is_busy_over_max_with_capacity_as_the_fallback() {
    let avg = |m: &str| format!("sum(avg_over_time({m}{SEL}[{{{{interval}}}}]))");
    let n = spec("{preset: yabeda}").resolve();
    assert_eq!(
        builtin_template(BuiltinMetric::ThreadUtilization, None, &n).unwrap(),
        format!(
            "({} or ({} - {})) / {}",
            avg("puma_busy_threads"),
            avg("puma_max_threads"),
            avg("puma_pool_capacity"),
            avg("puma_max_threads")
        )
    );
    // The reference images have no busy-threads gauge.
    let n = MetricNames::default();
    assert_eq!(
        builtin_template(BuiltinMetric::ThreadUtilization, None, &n).unwrap(),
        format!(
            "({} - {}) / {}",
            avg("puma_max_threads"),
            avg("puma_pool_capacity"),
            avg("puma_max_threads")
        )
    );
}

#[test]
fn bad_puma_names_are_refused_with_their_field() {
    let n = spec(r#"{busyThreads: "busy threads"}"#).resolve();
    let e = validate_names(&n).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("spec.analysis.metrics.busyThreads"),
        "{e}"
    );
    let e = builtin_template(BuiltinMetric::ThreadUtilization, None, &n).unwrap_err();
    assert_eq!(e.category(), "BadMetricName");
    let n = spec("{maxThreads: 1max}").resolve();
    assert!(validate_names(&n).is_err());
    let n = spec("{backlog: 'b-log'}").resolve();
    let e = builtin_template(BuiltinMetric::Backlog, None, &n).unwrap_err();
    assert!(
        e.to_string().starts_with("spec.analysis.metrics.backlog"),
        "{e}"
    );
}

#[test]
fn summary_quantile_matches_the_label_as_ruby_prints_it() {
    let (q, t) = summary_quantile_template(
        BuiltinMetric::Latency,
        None,
        "ruby_http_request_duration_seconds",
    )
    .unwrap();
    assert_eq!(q, 0.99);
    assert_eq!(
        t,
        r#"max(ruby_http_request_duration_seconds{namespace="{{namespace}}",pod=~"{{pods}}",quantile=~"0\\.990*"})"#
    );
    let (_, t) = summary_quantile_template(BuiltinMetric::QueueTime, Some(0.5), "q").unwrap();
    assert!(t.ends_with(r#"quantile=~"0\\.50*"})"#), "{t}");
    assert!(summary_quantile_template(BuiltinMetric::Latency, Some(1.0), "q").is_err());
}

#[test]
fn every_builtin_check_of_every_preset_is_valid_promql() {
    use crate::analysis::validate;
    for preset in ["yabeda", "prometheusExporter", "referenceApp"] {
        let a = super::fixtures::analysis(&format!(
            "[{{metric: latency, max: 1s}}, {{metric: memory, max: 1Gi}}, {{metric: gvlWait, max: 5%}}, \
             {{metric: errorRate, max: 1%}}, {{metric: queueTime, max: 50ms}}, {{metric: backlog, max: 3}}, \
             {{metric: threadUtilization, max: 90%}}]\nmetrics: {{preset: {preset}}}"
        ));
        assert_eq!(validate(&a), Ok(()), "{preset}");
    }
}

#[test]
fn the_summary_probes_are_valid_promql() {
    use crate::analysis::{pods_regex, render, TemplateVars};
    let vars = TemplateVars {
        namespace: "shop".into(),
        pods: pods_regex("storefront"),
        interval: std::time::Duration::from_secs(60),
        container: "web".into(),
        window: std::time::Duration::from_secs(60),
    };
    let name = "ruby_http_request_duration_seconds";
    let (_, quantile) = summary_quantile_template(BuiltinMetric::Latency, Some(0.9), name).unwrap();
    for t in [
        bucket_count_template(name),
        summary_pods_template(name),
        format!("count({quantile})"),
        quantile,
    ] {
        let q = render("latency", &t, &vars).unwrap();
        promql_parser::parser::parse(&q).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}
