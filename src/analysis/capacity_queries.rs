//! The capacity model's PromQL: the I/O share and the seconds per request it sizes threads
//! with (from the GVL counters, or from standard metrics: container CPU and the
//! request-duration `_sum / _count`), event loops per pod, and request rates.

use super::queries::{metric, QueryError, SELECTOR};
use crate::api::MetricNames;

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

/// An async worker's stalled event loop per request: the lag probe's late seconds over the
/// variant's requests (capacity: a blocking call bounds a Falcon worker as CPU does).
pub fn blocking_per_request_template(names: &MetricNames) -> Result<String, QueryError> {
    let lag = metric("eventLoopLagSeconds", &names.event_loop_lag_seconds)?;
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(per_request(lag, r))
}

/// Event loops per pod, the busiest (`max`) or the emptiest (`min`): the lag probe covers one
/// second per second in every loop that runs it, so its rate per pod counts the async workers
/// actually running — whatever a `count` in `falcon.rb` made of the rendered number.
pub fn event_loops_per_pod_template(names: &MetricNames, agg: &str) -> Result<String, QueryError> {
    let p = metric("eventLoopProbeSeconds", &names.event_loop_probe_seconds)?;
    Ok(format!(
        "{agg}(sum by (pod) (rate({p}{{{SELECTOR}}}[{{{{interval}}}}])))"
    ))
}

/// Standard metrics' CPU per request: the app container's CPU seconds (cAdvisor) over the
/// variant's requests. Everything the container runs counts: the server, GC, other threads.
pub fn container_cpu_per_request_template(names: &MetricNames) -> Result<String, QueryError> {
    let cpu = metric("cpuUsage", &names.cpu_usage)?;
    let r = metric("requestsTotal", &names.requests_total)?;
    Ok(format!(
        r#"sum(rate({cpu}{{{SELECTOR},container="{{{{container}}}}"}}[{{{{interval}}}}])) / sum(rate({r}{{{SELECTOR}}}[{{{{interval}}}}]))"#
    ))
}

/// Standard metrics' wall time per request: the request-duration histogram's (or summary's)
/// `_sum / _count`. No requests give NaN (0/0), not a value.
pub fn wall_per_request_template(names: &MetricNames) -> Result<String, QueryError> {
    let h = metric("requestDuration", &names.request_duration)?;
    Ok(format!(
        "sum(rate({h}_sum{{{SELECTOR}}}[{{{{interval}}}}])) / sum(rate({h}_count{{{SELECTOR}}}[{{{{interval}}}}]))"
    ))
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
