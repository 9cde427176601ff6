//! How many async workers a Falcon candidate's pods really run. The operator renders
//! `WEB_CONCURRENCY` (and `--count` for `falcon serve`), but a `count` in `falcon.rb` —
//! commonly `Etc.nprocessors`, the node's cores, not the pod's CPU limit — silently wins
//! under `falcon host`. The experiment would then judge, and promote, a config other than the
//! one it names, and the capacity gate would predict for the wrong number of workers.
//!
//! The event-loop probe (`eventLoopProbeSeconds`: the concurrency-metrics gem under a fiber
//! scheduler, the reference async server) covers one second per second in each loop it runs
//! in, so its rate per pod is the number of event loops running. Judged on the busiest pod:
//! a worker that started or stopped within the interval shows as a fraction, never as
//! `TOLERANCE` of a loop.

use std::time::Duration;

use crate::api::{
    parse_duration, CheckResult, ConcurrencyExperimentSpec, MetricNames, ServerKind, Verdict,
};

use super::capacity::candidate_config;
use super::capacity_queries::event_loops_per_pod_template;
use super::context::AnalysisContext;
use super::evaluate::AnalysisOutcome;
use super::judge::attach_rule;
use super::source::MetricSource;
use super::template::{pods_regex, render, TemplateVars};

pub use crate::api::WORKERS_CHECK;

/// Event loops per pod that count as another worker count than rendered.
pub const TOLERANCE: f64 = 0.75;

/// The candidate's event loops per pod over one interval: the emptiest and the busiest pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventLoops {
    pub min: f64,
    pub max: f64,
}

/// The candidate's event loops per pod (`Ok(None)`: the probe's series has no data for it),
/// and the query as sent, for status.
pub async fn measure_event_loops(
    source: &impl MetricSource,
    names: &MetricNames,
    ctx: &AnalysisContext,
    interval: Duration,
) -> (Result<Option<EventLoops>, String>, String) {
    let vars = TemplateVars {
        namespace: ctx.namespace.clone(),
        pods: pods_regex(&ctx.candidate_deployment),
        interval,
        container: ctx.container.clone(),
        window: interval,
    };
    let query = |agg: &str| {
        event_loops_per_pod_template(names, agg)
            .map_err(|e| e.to_string())
            .and_then(|t| render(WORKERS_CHECK, &t, &vars).map_err(|e| e.to_string()))
    };
    let (max_q, min_q) = match (query("max"), query("min")) {
        (Ok(max), Ok(min)) => (max, min),
        (Err(e), _) | (_, Err(e)) => return (Err(e), "(unresolved)".into()),
    };
    let (max, min) = futures::join!(
        source.query_value(&max_q, ctx.now),
        source.query_value(&min_q, ctx.now)
    );
    let usable = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0);
    let measured = match (max, min) {
        (Ok(max), Ok(min)) => Ok(usable(max).map(|max| EventLoops {
            min: usable(min).unwrap_or(max),
            max,
        })),
        (Err(e), _) | (_, Err(e)) => Err(format!("query failed ({}): {e}", e.category())),
    };
    (measured, max_q)
}

/// The analysis with the candidate's worker count judged: a `workers` entry among its checks
/// (the busiest pod's event loops as its value, the rendered workers in its limit) that fails
/// when they differ by `TOLERANCE` or more — and then the whole analysis fails — unless `fail`
/// is off, when it only records them. No probe series is only noted (an app without the gem
/// must not be held up); `rendered` is `None` when no worker count was rendered or read back.
pub fn judge_workers(
    mut outcome: AnalysisOutcome,
    measured: Result<Option<EventLoops>, String>,
    rendered: Option<i32>,
    probe: &str,
    fail: bool,
) -> AnalysisOutcome {
    let limit = match (rendered, fail) {
        (Some(n), true) => format!("{n} per pod (rendered)"),
        _ => "recorded only".to_string(),
    };
    let mut check = CheckResult {
        name: WORKERS_CHECK.into(),
        baseline: None,
        candidate: None,
        limit,
        verdict: Verdict::Pass,
        reason: None,
        evidence: None,
    };
    match measured {
        Err(e) => {
            check.verdict = Verdict::Inconclusive;
            check.reason = Some(format!("the event loops could not be counted: {e}"));
        }
        Ok(None) => {
            check.reason = Some(format!(
                "not measured: no {probe} for the candidate's pods (the concurrency-metrics \
                 gem's event-loop probe writes it under Falcon); a count in falcon.rb that \
                 overrides WEB_CONCURRENCY would go unnoticed"
            ));
        }
        Ok(Some(loops)) => {
            check.candidate = Some(loops.max);
            let seen = describe(loops);
            check.reason = Some(match rendered {
                None => format!("{seen}; no worker count was rendered to compare with"),
                Some(n) if (loops.max - f64::from(n)).abs() < TOLERANCE => {
                    format!("{seen}, as rendered ({n})")
                }
                Some(n) => {
                    if fail {
                        check.verdict = Verdict::Fail;
                    }
                    mismatch(&seen, loops.max, n)
                }
            });
        }
    }
    attach_rule(&mut outcome.record, check, fail && rendered.is_some());
    outcome
}

fn describe(loops: EventLoops) -> String {
    if (loops.max - loops.min).abs() < 0.05 {
        format!("{:.1} event loops per pod", loops.max)
    } else {
        format!("{:.1}–{:.1} event loops per pod", loops.min, loops.max)
    }
}

fn mismatch(seen: &str, max: f64, rendered: i32) -> String {
    if max > f64::from(rendered) {
        format!(
            "{seen}, rendered {rendered} worker(s): a count in falcon.rb overrides \
             WEB_CONCURRENCY (Etc.nprocessors counts the node's cores, not the pod's CPU \
             limit) — make it read ENV[\"WEB_CONCURRENCY\"]; the experiment is not judging \
             the config it names"
        )
    } else {
        format!(
            "{seen}, rendered {rendered} worker(s): fewer run than rendered — a count in \
             falcon.rb that ignores WEB_CONCURRENCY, or workers that die on start"
        )
    }
}

/// The worker-count rule for one analysis of a Falcon candidate (nothing for a Puma one, whose
/// workers Puma itself starts from the rendered flags): measured, judged and its query kept.
pub async fn check_workers(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    ctx: &AnalysisContext,
    mut outcome: AnalysisOutcome,
) -> AnalysisOutcome {
    let spec_config = ctx
        .candidate_server
        .as_ref()
        .unwrap_or(spec.single_candidate());
    let config = candidate_config(spec_config, ctx.baseline_config.as_ref());
    if config.server != ServerKind::Falcon {
        return outcome;
    }
    let analysis = &spec.analysis;
    let Ok(interval) = parse_duration("spec.analysis.interval", &analysis.interval) else {
        return outcome;
    };
    let names = analysis.metrics.resolve();
    let (measured, query) = measure_event_loops(source, &names, ctx, interval).await;
    let fail = analysis.fail_on_worker_mismatch;
    outcome = judge_workers(
        outcome,
        measured,
        config.workers,
        &names.event_loop_probe_seconds,
        fail,
    );
    outcome.queries.insert(WORKERS_CHECK.into(), query);
    outcome
}
