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
pub(super) fn valid_name(name: &str, colon: bool) -> bool {
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
