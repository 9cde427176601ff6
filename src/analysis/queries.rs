//! The built-in checks' PromQL, as templates over the exporter's metric names.
//!
//! Metric and label names are put into queries unquoted, so they are validated against
//! Prometheus' name grammar instead of escaped; the per-variant values go through
//! `template::render`.

use crate::api::{BuiltinMetric, MetricNames};

/// Default quantile of `latency` and `queueTime`.
pub const DEFAULT_QUANTILE: f64 = 0.99;

/// Every built-in selector: the variant's namespace and pods.
pub(super) const SELECTOR: &str = r#"namespace="{{namespace}}",pod=~"{{pods}}""#;

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
    /// `headroom` is computed from the capacity measurement (`HEADROOM_SOURCE`).
    #[error("check {check}: not one query (it is computed from the capacity model)")]
    NotAQuery { check: &'static str },
}

impl QueryError {
    pub fn category(&self) -> &'static str {
        match self {
            QueryError::BadName { .. } => "BadMetricName",
            QueryError::BadQuantile { .. } => "BadQuantile",
            QueryError::NotAQuery { .. } => "NotAQuery",
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

pub(super) fn metric<'a>(field: &'static str, value: &'a str) -> Result<&'a str, QueryError> {
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
    metric("cpuUsage", &names.cpu_usage)?;
    metric("dbPoolWaitSeconds", &names.db_pool_wait_seconds)?;
    metric("eventLoopLagSeconds", &names.event_loop_lag_seconds)?;
    metric("eventLoopProbeSeconds", &names.event_loop_probe_seconds)?;
    metric("backlog", &names.backlog)?;
    if let Some(b) = &names.busy_threads {
        metric("busyThreads", b)?;
    }
    metric("poolCapacity", &names.pool_capacity)?;
    metric("maxThreads", &names.max_threads)?;
    Ok(())
}

/// The check's quantile, default 0.99, strictly between 0 and 1.
pub(super) fn quantile_of(which: BuiltinMetric, quantile: Option<f64>) -> Result<f64, QueryError> {
    let q = quantile.unwrap_or(DEFAULT_QUANTILE);
    if q > 0.0 && q < 1.0 {
        Ok(q)
    } else {
        Err(QueryError::BadQuantile {
            check: which.name().into(),
            value: q,
        })
    }
}

/// A quantile of a histogram over the variant's pods.
fn histogram_quantile(
    which: BuiltinMetric,
    quantile: Option<f64>,
    histogram: &str,
) -> Result<String, QueryError> {
    let q = quantile_of(which, quantile)?;
    Ok(format!(
        "histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{{SELECTOR}}}[{{{{interval}}}}])))"
    ))
}

/// The metric a quantile check reads (`latency`, `queueTime`) and its field, validated.
pub(super) fn quantile_metric(
    which: BuiltinMetric,
    names: &MetricNames,
) -> Option<Result<(&'static str, &str), QueryError>> {
    let (field, name) = match which {
        BuiltinMetric::Latency => ("requestDuration", &names.request_duration),
        BuiltinMetric::QueueTime => ("queueTime", &names.queue_time),
        _ => return None,
    };
    Some(metric(field, name).map(|m| (field, m)))
}

/// Series of a histogram's buckets over the variant's pods: none means it is not one.
pub(super) fn bucket_count_template(name: &str) -> String {
    format!("count({name}_bucket{{{SELECTOR}}})")
}

/// Pods with series under the bare name: a Summary's quantile series (a histogram has none).
pub(super) fn summary_pods_template(name: &str) -> String {
    format!("count(count by (pod) ({name}{{{SELECTOR}}}))")
}

/// A Summary's `quantile` series for q. The exporter writes the label as Ruby prints the float
/// (`0.99`); trailing zeros are allowed in case a Prometheus normalizes it (`0.990`).
/// Across label sets (controller, action) the highest wins: the q-quantile of all requests is
/// never above the highest q-quantile of its parts, so this bounds it from above.
pub(super) fn summary_quantile_template(
    which: BuiltinMetric,
    quantile: Option<f64>,
    name: &str,
) -> Result<(f64, String), QueryError> {
    let q = quantile_of(which, quantile)?;
    let label = format!("{q}").replace('.', "\\\\.");
    Ok((
        q,
        format!(r#"max({name}{{{SELECTOR},quantile=~"{label}0*"}})"#),
    ))
}

/// What a `headroom` check shows as its query: where the value comes from.
pub const HEADROOM_SOURCE: &str =
    "capacity model: 1 - busiest pod's requests/s / estimated capacity per pod (docs/capacity.md)";

/// Whether the check is the built-in `headroom`, which no query measures.
pub fn is_headroom(check: &crate::api::Check) -> bool {
    check.query.is_none() && check.metric == Some(BuiltinMetric::Headroom)
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
        BuiltinMetric::Backlog => {
            // Per pod (its workers summed), averaged over the interval and then across the
            // variant's pods: comparable between variants of different sizes.
            let b = metric("backlog", &names.backlog)?;
            format!("avg(sum by (pod) (avg_over_time({b}{{{SELECTOR}}}[{{{{interval}}}}])))")
        }
        BuiltinMetric::ThreadUtilization => thread_utilization(names)?,
        BuiltinMetric::DbPoolWait => {
            let p = metric("dbPoolWaitSeconds", &names.db_pool_wait_seconds)?;
            let h = metric("requestDuration", &names.request_duration)?;
            format!(
                "sum(rate({p}{{{SELECTOR}}}[{{{{interval}}}}])) / sum(rate({h}_sum{{{SELECTOR}}}[{{{{interval}}}}]))"
            )
        }
        BuiltinMetric::CpuUtilization => cpu_utilization(names)?,
        BuiltinMetric::MemoryGrowth => {
            let m = metric("memory", &names.memory)?;
            format!("max({}) * 3600", memory_slope(m))
        }
        BuiltinMetric::TimeToLimit => time_to_limit(names)?,
        BuiltinMetric::EventLoopLag => {
            // Per pod (its workers summed): late seconds over the seconds the probe covered.
            let l = metric("eventLoopLagSeconds", &names.event_loop_lag_seconds)?;
            let p = metric("eventLoopProbeSeconds", &names.event_loop_probe_seconds)?;
            format!(
                "max(sum by (pod) (rate({l}{{{SELECTOR}}}[{{{{interval}}}}])) / sum by (pod) (rate({p}{{{SELECTOR}}}[{{{{interval}}}}])))"
            )
        }
        BuiltinMetric::Headroom => return Err(QueryError::NotAQuery { check: "headroom" }),
    })
}

/// Per pod, bytes per second: `deriv` is a least-squares fit, so cAdvisor's 10–30 s sampling
/// and a GC's saw-tooth average out over the window (the stage so far, at least the interval).
fn memory_slope(m: &str) -> String {
    format!(
        r#"max by (pod) (deriv({m}{{{SELECTOR},container="{{{{container}}}}"}}[{{{{window}}}}]))"#
    )
}

/// cAdvisor's memory limit of a container (0 without one): a fixed name, as the kubelet writes it.
pub const MEMORY_LIMIT: &str = "container_spec_memory_limit_bytes";
/// What `timeToLimit` says of a pod that does not grow: 10 years, a number the judge can compare.
const NEVER_S: f64 = 315_360_000.0;

/// The busiest pod's seconds to its memory limit: (limit − working set now) / slope. A slope
/// ≤ 0 counts as never (capped at 10 years); no limit, no value (Inconclusive).
fn time_to_limit(names: &MetricNames) -> Result<String, QueryError> {
    let m = metric("memory", &names.memory)?;
    let sel = format!(r#"{{{SELECTOR},container="{{{{container}}}}"}}"#);
    Ok(format!(
        "min(clamp_max((max by (pod) ({MEMORY_LIMIT}{sel} > 0) - max by (pod) ({m}{sel})) / clamp_min({}, 1e-9), {NEVER_S}))",
        memory_slope(m)
    ))
}

/// cAdvisor's CPU limit (quota over period, `-1` without a limit) and request (shares: 1024
/// per core, 2 without a request) of a container: fixed names, as the kubelet writes them.
pub const CPU_QUOTA: &str = "container_spec_cpu_quota";
pub const CPU_PERIOD: &str = "container_spec_cpu_period";
pub const CPU_SHARES: &str = "container_spec_cpu_shares";

/// The busiest pod's CPU over its limit, else its request. Per pod, because seed 004's rule
/// is "any worker at 100 %"; a container with neither limit nor request has no value
/// (Inconclusive), not a share of an unlimited CPU.
fn cpu_utilization(names: &MetricNames) -> Result<String, QueryError> {
    let cpu = metric("cpuUsage", &names.cpu_usage)?;
    let sel = format!(r#"{{{SELECTOR},container="{{{{container}}}}"}}"#);
    let spec = |m: &str| format!("max by (pod) ({m}{sel})");
    Ok(format!(
        "max(sum by (pod) (rate({cpu}{sel}[{{{{interval}}}}])) / on (pod) (({} > 0) / {} or ({} > 2) / 1024))",
        spec(CPU_QUOTA),
        spec(CPU_PERIOD),
        spec(CPU_SHARES)
    ))
}

/// Busy threads over max threads of the variant's pods, averaged over the interval. Without a
/// busy-threads gauge (or while it has no series: prometheus_exporter writes it only when its
/// collector process runs Puma ≥ 6.6), busy is max − pool capacity.
fn thread_utilization(names: &MetricNames) -> Result<String, QueryError> {
    let max = metric("maxThreads", &names.max_threads)?;
    let cap = metric("poolCapacity", &names.pool_capacity)?;
    let avg = |m: &str| format!("sum(avg_over_time({m}{{{SELECTOR}}}[{{{{interval}}}}]))");
    let from_capacity = format!("({} - {})", avg(max), avg(cap));
    let busy = match &names.busy_threads {
        Some(b) => format!("({} or {from_capacity})", avg(metric("busyThreads", b)?)),
        None => from_capacity,
    };
    Ok(format!("{busy} / {}", avg(max)))
}

/// Requests the variant served in the interval.
pub fn requests_template(names: &MetricNames) -> Result<String, QueryError> {
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(format!(
        "sum(increase({r}{{{SELECTOR}}}[{{{{interval}}}}]))"
    ))
}

/// The stage's requests per bucket of a quantile check's histogram (`judge: sequential`):
/// `{{window}}` reaches back to the stage's start.
pub fn bucket_increase_template(
    which: BuiltinMetric,
    names: &MetricNames,
) -> Option<Result<String, QueryError>> {
    let (_, h) = match quantile_metric(which, names)? {
        Ok(m) => m,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(format!(
        "sum by (le) (increase({h}_bucket{{{SELECTOR}}}[{{{{window}}}}]))"
    )))
}

/// The stage's 5xx and all requests (`judge: sequential`'s error-rate test).
pub fn error_count_templates(names: &MetricNames) -> Result<(String, String), QueryError> {
    let r = metric("requestsTotal", &names.requests_total)?;
    let s = label("statusLabel", &names.status_label)?;
    Ok((
        format!(r#"sum(increase({r}{{{SELECTOR},{s}=~"5.."}}[{{{{window}}}}])) or vector(0)"#),
        format!("sum(increase({r}{{{SELECTOR}}}[{{{{window}}}}]))"),
    ))
}
