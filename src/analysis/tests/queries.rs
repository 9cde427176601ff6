use crate::analysis::capacity_queries::*;
use crate::analysis::queries::*;
use crate::api::BuiltinMetric;
use crate::api::MetricNames;
use crate::api::MetricsSpec;

const SEL: &str = r#"{namespace="{{namespace}}",pod=~"{{pods}}"}"#;

#[test]
fn latency_is_a_histogram_quantile() {
    let names = MetricNames::default();
    assert_eq!(
        builtin_template(BuiltinMetric::Latency, None, &names).unwrap(),
        format!("histogram_quantile(0.99, sum by (le) (rate(rails_request_duration_seconds_bucket{SEL}[{{{{interval}}}}])))")
    );
    assert!(builtin_template(BuiltinMetric::Latency, Some(0.5), &names)
        .unwrap()
        .starts_with("histogram_quantile(0.5, "));
    let e = builtin_template(BuiltinMetric::Latency, Some(1.5), &names).unwrap_err();
    assert_eq!(e.category(), "BadQuantile");
}

#[test]
fn queue_time_is_a_histogram_quantile() {
    let names = MetricNames::default();
    assert_eq!(
        builtin_template(BuiltinMetric::QueueTime, Some(0.9), &names).unwrap(),
        format!("histogram_quantile(0.9, sum by (le) (rate(rails_request_queue_time_seconds_bucket{SEL}[{{{{interval}}}}])))")
    );
    assert!(builtin_template(BuiltinMetric::QueueTime, None, &names)
        .unwrap()
        .starts_with("histogram_quantile(0.99, "));
    let custom = MetricNames {
        queue_time: "http_server_queue_seconds".into(),
        ..MetricNames::default()
    };
    assert!(builtin_template(BuiltinMetric::QueueTime, None, &custom)
        .unwrap()
        .contains("rate(http_server_queue_seconds_bucket{"));
    let e = builtin_template(BuiltinMetric::QueueTime, Some(0.0), &names).unwrap_err();
    assert_eq!(e.category(), "BadQuantile");
    let bad = MetricNames {
        queue_time: "q{x=\"y\"}".into(),
        ..MetricNames::default()
    };
    let e = builtin_template(BuiltinMetric::QueueTime, None, &bad).unwrap_err();
    assert!(
        e.to_string().starts_with("spec.analysis.metrics.queueTime"),
        "{e}"
    );
    assert!(validate_names(&bad).is_err());
}

#[test]
fn memory_is_the_average_working_set_of_the_app_container() {
    assert_eq!(
        builtin_template(BuiltinMetric::Memory, None, &MetricNames::default()).unwrap(),
        r#"avg(avg_over_time(container_memory_working_set_bytes{namespace="{{namespace}}",pod=~"{{pods}}",container="{{container}}"}[{{interval}}]))"#
    );
}

#[test]
fn gvl_wait_is_a_share_of_request_time() {
    assert_eq!(
        builtin_template(BuiltinMetric::GvlWait, None, &MetricNames::default()).unwrap(),
        format!("sum(rate(ruby_gvl_wait_seconds_total{SEL}[{{{{interval}}}}])) / sum(rate(rails_request_duration_seconds_sum{SEL}[{{{{interval}}}}]))")
    );
}

#[test]
fn db_pool_wait_is_a_share_of_request_time() {
    assert_eq!(
        builtin_template(BuiltinMetric::DbPoolWait, None, &MetricNames::default()).unwrap(),
        format!("sum(rate(ruby_db_pool_wait_seconds_total{SEL}[{{{{interval}}}}])) / sum(rate(rails_request_duration_seconds_sum{SEL}[{{{{interval}}}}]))")
    );
}

#[test]
fn cpu_utilization_is_the_busiest_pods_cpu_over_its_limit_else_its_request() {
    let c = r#"{namespace="{{namespace}}",pod=~"{{pods}}",container="{{container}}"}"#;
    assert_eq!(
        builtin_template(BuiltinMetric::CpuUtilization, None, &MetricNames::default()).unwrap(),
        format!(
            "max(sum by (pod) (rate(container_cpu_usage_seconds_total{c}[{{{{interval}}}}])) / on (pod) \
             ((max by (pod) (container_spec_cpu_quota{c}) > 0) / max by (pod) (container_spec_cpu_period{c}) \
             or (max by (pod) (container_spec_cpu_shares{c}) > 2) / 1024))"
        )
    );
}

#[test]
fn memory_growth_and_time_to_limit_fit_the_working_set_over_the_window() {
    let c = r#"{namespace="{{namespace}}",pod=~"{{pods}}",container="{{container}}"}"#;
    let slope =
        format!("max by (pod) (deriv(container_memory_working_set_bytes{c}[{{{{window}}}}]))");
    assert_eq!(
        builtin_template(BuiltinMetric::MemoryGrowth, None, &MetricNames::default()).unwrap(),
        format!("max({slope}) * 3600")
    );
    assert_eq!(
        builtin_template(BuiltinMetric::TimeToLimit, None, &MetricNames::default()).unwrap(),
        format!(
            "min(clamp_max((max by (pod) (container_spec_memory_limit_bytes{c} > 0) - max by (pod) \
             (container_memory_working_set_bytes{c})) / clamp_min({slope}, 1e-9), 315360000))"
        )
    );
}

#[test]
fn event_loop_lag_is_the_busiest_pods_late_share() {
    let r = |m: &str| format!("sum by (pod) (rate({m}{SEL}[{{{{interval}}}}]))");
    assert_eq!(
        builtin_template(BuiltinMetric::EventLoopLag, None, &MetricNames::default()).unwrap(),
        format!(
            "max({} / {})",
            r("ruby_event_loop_lag_seconds_total"),
            r("ruby_event_loop_probe_seconds_total")
        )
    );
}

#[test]
fn error_rate_is_the_5xx_share() {
    let names = MetricNames {
        requests_total: "http_requests_total".into(),
        status_label: "code".into(),
        ..MetricNames::default()
    };
    assert_eq!(
        builtin_template(BuiltinMetric::ErrorRate, None, &names).unwrap(),
        r#"(sum(rate(http_requests_total{namespace="{{namespace}}",pod=~"{{pods}}",code=~"5.."}[{{interval}}])) or vector(0)) / sum(rate(http_requests_total{namespace="{{namespace}}",pod=~"{{pods}}"}[{{interval}}]))"#
    );
}

#[test]
fn requests_and_io_share() {
    let names = MetricNames::default();
    assert_eq!(
        requests_template(&names).unwrap(),
        format!("sum(increase(rails_requests_total{SEL}[{{{{interval}}}}]))")
    );
    let r = |m: &str| format!("sum(rate({m}{SEL}[{{{{interval}}}}]))");
    assert_eq!(
        io_share_template(&names).unwrap(),
        format!(
            "{} / ({} + {} + {})",
            r("ruby_io_wait_seconds_total"),
            r("ruby_running_seconds_total"),
            r("ruby_io_wait_seconds_total"),
            r("ruby_gvl_wait_seconds_total")
        )
    );
}

#[test]
fn per_request_times_and_the_busiest_pod() {
    let names = MetricNames::default();
    let r = |m: &str| format!("sum(rate({m}{SEL}[{{{{interval}}}}]))");
    assert_eq!(
        cpu_per_request_template(&names).unwrap(),
        format!(
            "{} / {}",
            r("ruby_running_seconds_total"),
            r("rails_requests_total")
        )
    );
    assert_eq!(
        io_per_request_template(&names).unwrap(),
        format!(
            "{} / {}",
            r("ruby_io_wait_seconds_total"),
            r("rails_requests_total")
        )
    );
    assert_eq!(
        busiest_pod_rate_template(&names).unwrap(),
        format!("max(sum by (pod) (rate(rails_requests_total{SEL}[{{{{interval}}}}])))")
    );
    assert_eq!(
        total_rate_template(&names).unwrap(),
        r("rails_requests_total")
    );
    let bad = MetricNames {
        running_seconds: "x{".into(),
        ..MetricNames::default()
    };
    assert!(cpu_per_request_template(&bad).is_err());
}

#[test]
fn the_standard_metrics_templates() {
    let names = MetricNames::default();
    let r = |m: &str| format!("sum(rate({m}{SEL}[{{{{interval}}}}]))");
    // cAdvisor's CPU of the app container only (a pod's sidecars and the pause container
    // have their own series), over the same pods' requests.
    assert_eq!(
        container_cpu_per_request_template(&names).unwrap(),
        format!(
            r#"sum(rate(container_cpu_usage_seconds_total{{namespace="{{{{namespace}}}}",pod=~"{{{{pods}}}}",container="{{{{container}}}}"}}[{{{{interval}}}}])) / {}"#,
            r("rails_requests_total")
        )
    );
    assert_eq!(
        wall_per_request_template(&names).unwrap(),
        format!(
            "{} / {}",
            r("rails_request_duration_seconds_sum"),
            r("rails_request_duration_seconds_count")
        )
    );
    let spec = MetricsSpec {
        cpu_usage: Some("process_cpu_seconds_total".into()),
        ..MetricsSpec::default()
    };
    assert!(container_cpu_per_request_template(&spec.resolve())
        .unwrap()
        .starts_with("sum(rate(process_cpu_seconds_total{"));
    let bad = MetricNames {
        cpu_usage: "x{".into(),
        ..MetricNames::default()
    };
    let e = container_cpu_per_request_template(&bad).unwrap_err();
    assert!(e.to_string().contains("metrics.cpuUsage"), "{e}");
    assert!(validate_names(&bad).is_err());
}

#[test]
fn names_that_could_inject_are_refused() {
    let mut names = MetricNames {
        memory: r#"up{job="x"} or container_memory_working_set_bytes"#.into(),
        ..MetricNames::default()
    };
    let e = builtin_template(BuiltinMetric::Memory, None, &names).unwrap_err();
    assert!(
        e.to_string().starts_with("spec.analysis.metrics.memory"),
        "{e}"
    );
    names = MetricNames::default();
    names.status_label = "status=~\".*\",x".into();
    assert!(builtin_template(BuiltinMetric::ErrorRate, None, &names).is_err());
    names.status_label = "9status".into();
    assert!(validate_names(&names).is_err());
    assert!(validate_names(&MetricNames::default()).is_ok());
    assert!(valid_name("ns:recorded_rule:rate5m", true));
    assert!(!valid_name("ns:rule", false));
    assert!(!valid_name("", true));
}
