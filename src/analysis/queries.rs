//! The built-in checks' PromQL, as templates over the exporter's metric names.
//!
//! Metric and label names are put into queries unquoted, so they are validated against
//! Prometheus' name grammar instead of escaped; the per-variant values go through
//! `template::render`.

use crate::api::{BuiltinMetric, MetricNames};

/// Default quantile of `latency` and `queueTime`.
pub const DEFAULT_QUANTILE: f64 = 0.99;

/// Every built-in selector: the variant's namespace and pods.
const SELECTOR: &str = r#"namespace="{{namespace}}",pod=~"{{pods}}""#;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("spec.analysis.metrics.{field}: {value:?} is not a Prometheus {kind} name")]
    BadName {
        field: &'static str,
        value: String,
        kind: &'static str,
    },
    #[error("check {check}: quantile {value} must be between 0 and 1")]
    BadQuantile { check: String, value: f64 },
}

impl QueryError {
    pub fn category(&self) -> &'static str {
        match self {
            QueryError::BadName { .. } => "BadMetricName",
            QueryError::BadQuantile { .. } => "BadQuantile",
        }
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*` (metrics) or `[a-zA-Z_][a-zA-Z0-9_]*` (labels).
fn valid_name(name: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic() || c == '_' || (colon && c == ':') || (!first && c.is_ascii_digit())
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

fn metric<'a>(field: &'static str, value: &'a str) -> Result<&'a str, QueryError> {
    if valid_name(value, true) {
        Ok(value)
    } else {
        Err(QueryError::BadName {
            field,
            value: value.to_string(),
            kind: "metric",
        })
    }
}

fn label<'a>(field: &'static str, value: &'a str) -> Result<&'a str, QueryError> {
    if valid_name(value, false) {
        Ok(value)
    } else {
        Err(QueryError::BadName {
            field,
            value: value.to_string(),
            kind: "label",
        })
    }
}

/// Validates every metric and label name at once (for spec validation).
pub fn validate_names(names: &MetricNames) -> Result<(), QueryError> {
    metric("requestDuration", &names.request_duration)?;
    metric("requestsTotal", &names.requests_total)?;
    label("statusLabel", &names.status_label)?;
    metric("gvlWaitSeconds", &names.gvl_wait_seconds)?;
    metric("ioWaitSeconds", &names.io_wait_seconds)?;
    metric("runningSeconds", &names.running_seconds)?;
    metric("queueTime", &names.queue_time)?;
    metric("memory", &names.memory)?;
    Ok(())
}

/// A quantile of a histogram over the variant's pods.
fn histogram_quantile(
    which: BuiltinMetric,
    quantile: Option<f64>,
    histogram: &str,
) -> Result<String, QueryError> {
    let q = quantile.unwrap_or(DEFAULT_QUANTILE);
    if !(q > 0.0 && q < 1.0) {
        return Err(QueryError::BadQuantile {
            check: which.name().into(),
            value: q,
        });
    }
    Ok(format!(
        "histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{{SELECTOR}}}[{{{{interval}}}}])))"
    ))
}

/// The template of a built-in check. `quantile` only matters for latency and queue time.
pub fn builtin_template(
    which: BuiltinMetric,
    quantile: Option<f64>,
    names: &MetricNames,
) -> Result<String, QueryError> {
    Ok(match which {
        BuiltinMetric::Latency => {
            let h = metric("requestDuration", &names.request_duration)?;
            histogram_quantile(which, quantile, h)?
        }
        BuiltinMetric::QueueTime => {
            let h = metric("queueTime", &names.queue_time)?;
            histogram_quantile(which, quantile, h)?
        }
        BuiltinMetric::Memory => {
            // Working set averaged over the interval per pod, then across the variant's pods:
            // one scrape's spike does not decide, a steady growth does.
            let m = metric("memory", &names.memory)?;
            format!(
                r#"avg(avg_over_time({m}{{{SELECTOR},container="{{{{container}}}}"}}[{{{{interval}}}}]))"#
            )
        }
        BuiltinMetric::GvlWait => {
            let g = metric("gvlWaitSeconds", &names.gvl_wait_seconds)?;
            let h = metric("requestDuration", &names.request_duration)?;
            format!(
                "sum(rate({g}{{{SELECTOR}}}[{{{{interval}}}}])) / sum(rate({h}_sum{{{SELECTOR}}}[{{{{interval}}}}]))"
            )
        }
        BuiltinMetric::ErrorRate => {
            let r = metric("requestsTotal", &names.requests_total)?;
            let s = label("statusLabel", &names.status_label)?;
            // Without any 5xx series the numerator is empty, not 0; `or vector(0)` keeps a
            // healthy variant from looking like one without data. No requests at all still
            // gives no value (empty denominator) or NaN (0/0): Inconclusive either way.
            format!(
                r#"(sum(rate({r}{{{SELECTOR},{s}=~"5.."}}[{{{{interval}}}}])) or vector(0)) / sum(rate({r}{{{SELECTOR}}}[{{{{interval}}}}]))"#
            )
        }
    })
}

/// Requests the variant served in the interval.
pub fn requests_template(names: &MetricNames) -> Result<String, QueryError> {
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(format!(
        "sum(increase({r}{{{SELECTOR}}}[{{{{interval}}}}]))"
    ))
}

/// I/O share p = io / (running + io + gvl wait), from the three counters' rates.
pub fn io_share_template(names: &MetricNames) -> Result<String, QueryError> {
    let io = metric("ioWaitSeconds", &names.io_wait_seconds)?;
    let run = metric("runningSeconds", &names.running_seconds)?;
    let gvl = metric("gvlWaitSeconds", &names.gvl_wait_seconds)?;
    let rate = |m: &str| format!("sum(rate({m}{{{SELECTOR}}}[{{{{interval}}}}]))");
    Ok(format!(
        "{} / ({} + {} + {})",
        rate(io),
        rate(run),
        rate(io),
        rate(gvl)
    ))
}

/// Seconds of `counter` per request over the window: the CPU (running) or I/O time one request
/// takes, for the capacity estimate. No requests give NaN (0/0), not a value.
fn per_request(counter: &str, requests: &str) -> String {
    format!(
        "sum(rate({counter}{{{SELECTOR}}}[{{{{interval}}}}])) / sum(rate({requests}{{{SELECTOR}}}[{{{{interval}}}}]))"
    )
}

/// CPU time per request: running seconds (holding the GVL) per request.
pub fn cpu_per_request_template(names: &MetricNames) -> Result<String, QueryError> {
    let run = metric("runningSeconds", &names.running_seconds)?;
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(per_request(run, r))
}

/// I/O time per request: I/O wait seconds per request.
pub fn io_per_request_template(names: &MetricNames) -> Result<String, QueryError> {
    let io = metric("ioWaitSeconds", &names.io_wait_seconds)?;
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(per_request(io, r))
}

/// Requests per second of the busiest pod: headroom is decided by the pod that saturates first.
pub fn busiest_pod_rate_template(names: &MetricNames) -> Result<String, QueryError> {
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(format!(
        "max(sum by (pod) (rate({r}{{{SELECTOR}}}[{{{{interval}}}}])))"
    ))
}

/// Requests per second over the pods given (both variants: the total a stage's share is of).
pub fn total_rate_template(names: &MetricNames) -> Result<String, QueryError> {
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(format!("sum(rate({r}{{{SELECTOR}}}[{{{{interval}}}}]))"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
