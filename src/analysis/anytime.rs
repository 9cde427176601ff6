//! `judge: sequential`: which checks are anytime-valid tests, what they read from Prometheus
//! (the stage's requests per histogram bucket, its requests and 5xx), and their verdicts
//! (`sequential::decide`). Every other check keeps the per-interval rule.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{
    parse_duration, parse_percent, Analysis, BuiltinMetric, Check, CheckResult,
    ConcurrencyExperimentSpec, JudgeMode, MetricNames, QuantityError,
};

use super::context::fit_window;
use super::context::AnalysisContext;
use super::judge::{Limits, Unit, QUEUE_TIME_FLOOR};
use super::queries::{bucket_increase_template, error_count_templates, quantile_of};
use super::sequential::{decide, per_test_alpha, rate::Counts, Bounds, Buckets, Data};
use super::source::MetricSource;
use super::template::{pods_regex, render, TemplateVars};

/// The tests a check runs under `judge: sequential`, or `None` when it is judged per interval:
/// only the built-in `latency`, `queueTime` and `errorRate` (a distribution or counts the
/// tests can read), limited by `max` and/or `maxIncrease` alone.
pub fn sequential_bounds(check: &Check, limits: &Limits) -> Option<Bounds> {
    let tested = matches!(
        check.metric,
        Some(BuiltinMetric::Latency | BuiltinMetric::QueueTime | BuiltinMetric::ErrorRate)
    );
    let only_these = limits.min.is_none() && check.min_improvement.is_none();
    let bounds = Bounds {
        ratio: limits.max_increase.map(|s| 1.0 + s),
        max: limits.max,
    };
    (tested && check.query.is_none() && only_these && bounds.tests() > 0).then_some(bounds)
}

/// The level of each test of `analysis` (`falseRollbackRate` over all its tests and the
/// stages), or `None` under `judge: perInterval`.
pub fn test_alpha(analysis: &Analysis, stages: usize) -> Result<Option<f64>, QuantityError> {
    if analysis.judge != JudgeMode::Sequential {
        return Ok(None);
    }
    let rate = parse_percent(
        "spec.analysis.falseRollbackRate",
        &analysis.false_rollback_rate,
    )?;
    if !(rate > 0.0 && rate < 1.0) {
        return Err(QuantityError::OutOfRange {
            field: "spec.analysis.falseRollbackRate".into(),
            value: analysis.false_rollback_rate.clone(),
            why: "must be more than 0% and less than 100%",
        });
    }
    let tests = analysis
        .checks
        .iter()
        .filter_map(|c| sequential_bounds(c, &Limits::from_check(c).ok()?))
        .map(|b| b.tests())
        .sum();
    Ok(Some(per_test_alpha(rate, tests, stages)))
}

/// What a sequential check read, or why it is judged per interval instead.
pub(super) enum Read {
    Data(Data),
    /// Prometheus failed: the check is Inconclusive with this reason.
    Failed(String),
    /// No buckets (a Summary, or no histogram at all): judged per interval, with this note.
    PerInterval(String),
}

/// Reads the stage so far for a sequential check. The baseline is read over the same window;
/// at 100 % (it serves nothing) over its last stage, up to when this one began.
pub(super) async fn read(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    names: &MetricNames,
    ctx: &AnalysisContext,
    check: &Check,
    interval: Duration,
) -> Read {
    let window = fit_window(ctx.stage_started_at, ctx.now, interval);
    let vars = |deployment: &str, window: Duration| TemplateVars {
        namespace: ctx.namespace.clone(),
        pods: pods_regex(deployment),
        interval,
        container: ctx.container.clone(),
        window,
    };
    let candidate = (vars(&ctx.candidate_deployment, window), ctx.now);
    let baseline = if ctx.weight >= 100 {
        last_stage(spec, ctx).map(|(at, w)| (vars(&ctx.baseline_deployment, w), at))
    } else {
        Some((vars(&ctx.baseline_deployment, window), ctx.now))
    };
    let name = check.display_name();
    match check.metric {
        Some(m @ (BuiltinMetric::Latency | BuiltinMetric::QueueTime)) => {
            let template = match bucket_increase_template(m, names) {
                Some(Ok(t)) => t,
                Some(Err(e)) => return Read::Failed(e.to_string()),
                None => return Read::PerInterval("not a quantile".into()),
            };
            let buckets = |v: &(TemplateVars, Timestamp)| {
                let q = render(&name, &template, &v.0);
                let at = v.1;
                async move {
                    let q = q.map_err(|e| e.to_string())?;
                    let pairs = source
                        .query_by_label(&q, at, "le")
                        .await
                        .map_err(|e| format!("{} ({})", e, e.category()))?;
                    Ok::<_, String>(parse_buckets(&pairs))
                }
            };
            let c = match buckets(&candidate).await {
                Ok(Some(c)) => c,
                Ok(None) => {
                    return Read::PerInterval(
                        "judged per interval: no histogram buckets for the sequential test (a \
                         Summary has none)"
                            .into(),
                    )
                }
                Err(e) => return Read::Failed(format!("candidate buckets: {e}")),
            };
            let b = match &baseline {
                Some(v) => match buckets(v).await {
                    Ok(b) => b,
                    Err(e) => return Read::Failed(format!("baseline buckets: {e}")),
                },
                None => None,
            };
            let floor = (m == BuiltinMetric::QueueTime).then_some(QUEUE_TIME_FLOOR);
            let p = quantile_of(m, check.quantile).unwrap_or(0.99);
            Read::Data(Data::Quantile {
                p,
                baseline: b,
                candidate: c,
                floor,
            })
        }
        Some(BuiltinMetric::ErrorRate) => {
            let (errors, total) = match error_count_templates(names) {
                Ok(t) => t,
                Err(e) => return Read::Failed(e.to_string()),
            };
            let counts = |v: &(TemplateVars, Timestamp)| {
                let q = (render(&name, &errors, &v.0), render(&name, &total, &v.0));
                let at = v.1;
                async move {
                    let (Ok(e), Ok(t)) = q else {
                        return Err("the error-count query did not render".to_string());
                    };
                    let (e, t) =
                        futures::join!(source.query_value(&e, at), source.query_value(&t, at));
                    let fail = |e: super::PrometheusError| format!("{} ({})", e, e.category());
                    Ok((
                        e.map_err(fail)?.unwrap_or(0.0),
                        t.map_err(fail)?.unwrap_or(0.0),
                    ))
                }
            };
            let (ce, cn) = match counts(&candidate).await {
                Ok(c) => c,
                Err(e) => return Read::Failed(format!("candidate counts: {e}")),
            };
            let (be, bn) = match &baseline {
                Some(v) => match counts(v).await {
                    Ok(c) => c,
                    Err(e) => return Read::Failed(format!("baseline counts: {e}")),
                },
                None => (0.0, 0.0),
            };
            Read::Data(Data::Errors(Counts {
                baseline_requests: bn,
                baseline_errors: be,
                candidate_requests: cn,
                candidate_errors: ce,
            }))
        }
        _ => Read::PerInterval("not a sequential check".into()),
    }
}

/// When the stage before this one ended (this one's start) and how long it ran: the
/// baseline's last traffic, for a stage at 100 %. None for a first stage.
fn last_stage(
    spec: &ConcurrencyExperimentSpec,
    ctx: &AnalysisContext,
) -> Option<(Timestamp, Duration)> {
    let index = usize::try_from(ctx.stage_index).ok()?.checked_sub(1)?;
    let stage = spec.stages.get(index)?;
    let d = parse_duration("spec.stages[].duration", &stage.duration).ok()?;
    Some((ctx.stage_started_at?, d.max(Duration::from_secs(1))))
}

/// `(le, count)` pairs as buckets; none when there is no `+Inf` bucket (not a histogram).
pub(super) fn parse_buckets(pairs: &[(String, f64)]) -> Option<Buckets> {
    let parsed: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|(le, v)| {
            let le = match le.trim() {
                "+Inf" | "Inf" | "inf" => f64::INFINITY,
                other => other.parse().ok()?,
            };
            Some((le, *v))
        })
        .collect();
    parsed
        .iter()
        .any(|(le, _)| le.is_infinite())
        .then(|| Buckets::from_pairs(parsed))
}

/// Judges a sequential check from what was read, into `result` (whose per-interval values
/// stay for display).
pub(super) fn judge(
    mut result: CheckResult,
    check: &Check,
    bounds: Bounds,
    alpha: f64,
    data: &Data,
) -> CheckResult {
    let unit = Unit::of(check);
    let (verdict, reason, evidence) = decide(data, bounds, alpha, |v| unit.format(v));
    result.verdict = verdict;
    result.reason = Some(reason);
    result.evidence = Some(evidence);
    result
}
