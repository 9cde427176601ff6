//! The capacity model's measurements for one analysis: each variant's CPU and I/O seconds per
//! request (the GVL counters', else the standard metrics'), its busiest pod's rate, an async
//! worker's blocking per request, and the `headroom` checks filled from them. Read through the
//! same `MetricSource` as the checks; the model itself is `capacity`.

use jiff::Timestamp;

use crate::api::{
    CapacityMeasurement, Check, CheckResult, ConcurrencyExperimentSpec, MetricNames,
    RenderedServer, ServerKind,
};

use super::capacity::{
    candidate_config, choose_times, variant_capacity, ChosenTimes, GvlTimes, StandardTimes,
};
use super::capacity_queries::{
    blocking_per_request_template, busiest_pod_rate_template, container_cpu_per_request_template,
    cpu_per_request_template, io_per_request_template, total_rate_template,
    wall_per_request_template,
};
use super::context::AnalysisContext;
use super::queries::is_headroom;
use super::source::MetricSource;
use super::template::{render, TemplateVars};

/// One value for the capacity estimate; any failure is no value (the estimate is left out,
/// never made up).
async fn capacity_value(
    source: &impl MetricSource,
    template: Option<&str>,
    vars: &TemplateVars,
    at: Timestamp,
) -> Option<f64> {
    let q = render("capacity", template?, vars).ok()?;
    source.query_value(&q, at).await.ok().flatten()
}

/// The standard metrics' CPU and wall seconds per request over `vars`' pods.
pub(super) async fn standard_times(
    source: &impl MetricSource,
    names: &MetricNames,
    vars: &TemplateVars,
    at: Timestamp,
) -> StandardTimes {
    let cpu = container_cpu_per_request_template(names).ok();
    let wall = wall_per_request_template(names).ok();
    let (cpu, wall) = futures::join!(
        capacity_value(source, cpu.as_deref(), vars, at),
        capacity_value(source, wall.as_deref(), vars, at)
    );
    StandardTimes { cpu, wall }
}

/// One variant's CPU and I/O seconds per request (the GVL counters', else the standard
/// metrics') and busiest pod's rate; nothing for a variant that serves nothing (`None`).
async fn variant_values(
    source: &impl MetricSource,
    names: &MetricNames,
    vars: Option<&TemplateVars>,
    async_server: bool,
    at: Timestamp,
) -> (ChosenTimes, Option<f64>) {
    let Some(vars) = vars else {
        return (ChosenTimes::default(), None);
    };
    let cpu = cpu_per_request_template(names).ok();
    let io = io_per_request_template(names).ok();
    let busiest = busiest_pod_rate_template(names).ok();
    // Only an async server's event loop can stall: no query for a threaded variant.
    let blocking = async_server
        .then(|| blocking_per_request_template(names).ok())
        .flatten();
    let (cpu, io, busiest, blocking) = futures::join!(
        capacity_value(source, cpu.as_deref(), vars, at),
        capacity_value(source, io.as_deref(), vars, at),
        capacity_value(source, busiest.as_deref(), vars, at),
        capacity_value(source, blocking.as_deref(), vars, at)
    );
    let exact = GvlTimes { cpu, io };
    // Asked only when the counters fall short: most analyses need no more queries.
    let standard = match exact.complete() {
        true => None,
        false => Some(standard_times(source, names, vars, at).await),
    };
    let times = ChosenTimes {
        blocking,
        ..choose_times(exact, standard)
    };
    (times, busiest)
}

/// CPU and I/O seconds per request and the busiest pod's rate per variant (`baseline` is
/// `None` when it serves nothing), the total rate over both, and each variant's capacity.
pub(super) async fn measure_capacity(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    ctx: &AnalysisContext,
    baseline: Option<&TemplateVars>,
    candidate: &TemplateVars,
    both: &TemplateVars,
) -> Option<CapacityMeasurement> {
    let names = &spec.analysis.metrics.resolve();
    let total = total_rate_template(names).ok();
    let at = ctx.now;
    let base_config = ctx.baseline_config.as_ref();
    let spec_config = ctx
        .candidate_server
        .as_ref()
        .unwrap_or(spec.single_candidate());
    let cand_config = candidate_config(spec_config, base_config);
    let falcon = |c: Option<&RenderedServer>| c.is_some_and(|c| c.server == ServerKind::Falcon);
    let (b, c, total) = futures::join!(
        variant_values(source, names, baseline, falcon(base_config), at),
        variant_values(
            source,
            names,
            Some(candidate),
            falcon(Some(&cand_config)),
            at
        ),
        capacity_value(source, total.as_deref(), both, at)
    );
    CapacityMeasurement {
        baseline: variant_capacity(b.0, b.1, base_config, ctx.baseline_cpu_limit),
        candidate: variant_capacity(c.0, c.1, Some(&cand_config), ctx.candidate_cpu_limit),
        total_rate: total.filter(|r| r.is_finite() && *r >= 0.0),
    }
    .non_empty()
}

/// The `headroom` checks' reasons say where the capacity's times came from: standard metrics
/// count GVL wait as I/O, which a reader of a borderline verdict needs to know.
pub(super) fn note_capacity_source(
    specs: &[Check],
    mut checks: Vec<CheckResult>,
    capacity: Option<&CapacityMeasurement>,
) -> Vec<CheckResult> {
    let side = |v: Option<&crate::api::VariantCapacity>| v.and_then(|v| v.source);
    let (b, c) = (
        side(capacity.and_then(|m| m.baseline.as_ref())),
        side(capacity.and_then(|m| m.candidate.as_ref())),
    );
    let note = match (b, c) {
        (None, None) => return checks,
        (Some(b), Some(c)) if b != c => format!(
            "capacity from {} (baseline) and {} (candidate)",
            b.describe(),
            c.describe()
        ),
        (Some(s), _) | (_, Some(s)) => format!("capacity from {}", s.describe()),
    };
    for (check, r) in specs.iter().zip(checks.iter_mut()) {
        if is_headroom(check) {
            r.reason = Some(match r.reason.take() {
                Some(reason) => format!("{reason} ({note})"),
                None => note.clone(),
            });
        }
    }
    checks
}
