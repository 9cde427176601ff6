//! A selection's interval (docs/selection.md): every surviving candidate judged against the
//! fresh baseline with the spec's checks (`analyse`, once per candidate) and the objective per
//! variant; and, for selections and stages alike, the long-running target's check values
//! beside the fresh baseline's (`baseline_values`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::check::measure_check;
use super::context::AnalysisContext;
use super::evaluate::{analyse, AnalysisOutcome};
use super::queries::builtin_template;
use super::source::MetricSource;
use super::template::{pods_regex, render, TemplateVars};
use super::validate::AnalysisSpecError;
use crate::api::{
    parse_duration, AnalysisRecord, BaselineValues, BuiltinMetric, ConcurrencyExperimentSpec,
    ObjectiveMetric, ServerConfig, Verdict,
};

/// Where one interval of a selection looks.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectionContext {
    /// Namespace, container, time and the baseline side: `baseline_deployment` is the fresh
    /// baseline, `baseline_config` and `baseline_cpu_limit` the target's (it is a copy).
    /// The candidate fields are filled per candidate.
    pub base: AnalysisContext,
    /// The long-running target, measured beside the fresh baseline for status.
    pub target_deployment: String,
    pub candidates: Vec<CandidateToJudge>,
}

/// One surviving candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateToJudge {
    /// Index into `spec.candidates`.
    pub index: usize,
    pub deployment: String,
    pub config: ServerConfig,
    pub cpu_limit: Option<f64>,
    /// Its share of traffic now, percent.
    pub weight: i32,
}

/// One interval of the selection: every surviving candidate judged against the fresh
/// baseline, and the objective per variant.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectionAnalysis {
    pub at: Timestamp,
    /// The fresh baseline's objective value in the interval.
    pub fresh_baseline_objective: Option<f64>,
    pub candidates: Vec<CandidateAnalysis>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CandidateAnalysis {
    /// Index into `spec.candidates`.
    pub index: usize,
    /// The checks with the candidate as candidate and the fresh baseline as baseline.
    pub outcome: AnalysisOutcome,
    /// The candidate's objective value in the interval.
    pub objective: Option<f64>,
}

/// Where the objective's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Objective {
    /// A query rendered per variant like a check's.
    Query(String),
    /// `capacity.cpuPerRequest` of the candidate's analysis (and of its baseline side).
    CpuPerRequest,
}

/// The objective of `spec.selection`: `memory` is the built-in memory query; `latency` and
/// `queueTime` the built-in histogram quantile, at the quantile of the spec's check on that
/// metric (p99 without one); `custom` its query.
pub fn objective(spec: &ConcurrencyExperimentSpec) -> Result<Objective, AnalysisSpecError> {
    let sel = spec.selection_or_default();
    let names = &spec.analysis.metrics.resolve();
    let quantile = |m: BuiltinMetric| {
        spec.analysis
            .checks
            .iter()
            .find(|c| c.metric == Some(m) && c.query.is_none())
            .and_then(|c| c.quantile)
    };
    let builtin = |m: BuiltinMetric| -> Result<Objective, AnalysisSpecError> {
        Ok(Objective::Query(builtin_template(m, quantile(m), names)?))
    };
    match sel.objective.minimize {
        ObjectiveMetric::Memory => builtin(BuiltinMetric::Memory),
        ObjectiveMetric::Latency => builtin(BuiltinMetric::Latency),
        ObjectiveMetric::QueueTime => builtin(BuiltinMetric::QueueTime),
        ObjectiveMetric::Cpu => Ok(Objective::CpuPerRequest),
        // The schema requires the query with `custom`; an empty one renders to an error.
        ObjectiveMetric::Custom => Ok(Objective::Query(
            sel.objective.query.clone().unwrap_or_default(),
        )),
    }
}

/// The candidate `c`'s analysis context: the fresh baseline as baseline.
fn candidate_context(base: &AnalysisContext, c: &CandidateToJudge) -> AnalysisContext {
    AnalysisContext {
        candidate_deployment: c.deployment.clone(),
        candidate_cpu_limit: c.cpu_limit,
        candidate_server: Some(c.config.clone()),
        weight: c.weight,
        ..base.clone()
    }
}

/// Runs one selection interval. Candidates one after the other: each analysis already runs
/// a few checks at once, and N of them together would crowd Prometheus. No history is passed:
/// `status.analyses` holds the stages' records, not a candidate's.
pub async fn analyse_selection(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    sctx: &SelectionContext,
) -> SelectionAnalysis {
    let base = &sctx.base;
    let objective = objective(spec);
    let interval = parse_duration("spec.analysis.interval", &spec.analysis.interval).ok();
    let vars = |deployment: &str| {
        interval.map(|interval| TemplateVars {
            namespace: base.namespace.clone(),
            pods: pods_regex(deployment),
            interval,
            window: interval,
            container: base.container.clone(),
        })
    };
    let query_objective = |deployment: String| {
        let vars = vars(&deployment);
        let objective = &objective;
        async move {
            let (Ok(Objective::Query(t)), Some(vars)) = (objective, vars) else {
                return None;
            };
            let q = render("objective", t, &vars).ok()?;
            source.query_value(&q, base.now).await.ok().flatten()
        }
    };
    let mut candidates = Vec::with_capacity(sctx.candidates.len());
    let mut fresh_cpu = None;
    for c in &sctx.candidates {
        let ctx = candidate_context(base, c);
        let outcome = analyse(source, spec, &ctx, &[], &BTreeMap::new()).await;
        // A Falcon variant's worker count as it runs, as for the single candidate.
        let outcome = super::workers::check_workers(source, spec, &ctx, outcome).await;
        let capacity = outcome.record.capacity.as_ref();
        let cpu = |side: Option<&crate::api::VariantCapacity>| side?.cpu_per_request;
        let objective = match &objective {
            Ok(Objective::CpuPerRequest) => {
                fresh_cpu = fresh_cpu.or(cpu(capacity.and_then(|m| m.baseline.as_ref())));
                cpu(capacity.and_then(|m| m.candidate.as_ref()))
            }
            _ => query_objective(c.deployment.clone()).await,
        };
        candidates.push(CandidateAnalysis {
            index: c.index,
            outcome,
            objective,
        });
    }
    let fresh_baseline_objective = match &objective {
        Ok(Objective::CpuPerRequest) => fresh_cpu,
        _ => query_objective(base.baseline_deployment.clone()).await,
    };
    SelectionAnalysis {
        at: base.now,
        fresh_baseline_objective,
        candidates,
    }
}

/// Each check's value on the long-running `target` and on the fresh baseline (`ctx`'s
/// baseline), unjudged: status shows them side by side.
pub async fn baseline_values(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    ctx: &AnalysisContext,
    target: &str,
) -> Vec<BaselineValues> {
    let Ok(interval) = parse_duration("spec.analysis.interval", &spec.analysis.interval) else {
        return Vec::new();
    };
    let base = ctx;
    let vars = |deployment: &str| TemplateVars {
        namespace: base.namespace.clone(),
        pods: pods_regex(deployment),
        interval,
        window: interval,
        container: base.container.clone(),
    };
    let (target, fresh) = (vars(target), vars(&base.baseline_deployment));
    let analysis = &spec.analysis;
    let names = analysis.metrics.resolve();
    let mut out = Vec::with_capacity(analysis.checks.len());
    for check in &analysis.checks {
        let m = measure_check(source, &names, check, &target, &fresh, base.now).await;
        out.push(BaselineValues {
            name: m.result.name,
            target: m.result.baseline,
            fresh: m.result.candidate,
            reason: m.limits.is_none().then_some(m.result.reason).flatten(),
        });
    }
    out
}

/// The interval when Prometheus cannot even be addressed: every candidate Inconclusive with
/// the reason — never a Pass, never an elimination.
pub fn unreachable_selection(sctx: &SelectionContext, reason: &str) -> SelectionAnalysis {
    let base = &sctx.base;
    let candidates = sctx
        .candidates
        .iter()
        .map(|c| CandidateAnalysis {
            index: c.index,
            outcome: AnalysisOutcome {
                record: AnalysisRecord {
                    at: Time(base.now),
                    stage_index: base.stage_index,
                    weight: c.weight,
                    verdict: Verdict::Inconclusive,
                    baseline_requests: None,
                    candidate_requests: None,
                    checks: Vec::new(),
                    reason: Some(reason.to_string()),
                    capacity: None,
                },
                recommendation: None,
                no_data: false,
                queries: Default::default(),
            },
            objective: None,
        })
        .collect();
    SelectionAnalysis {
        at: base.now,
        fresh_baseline_objective: None,
        candidates,
    }
}
