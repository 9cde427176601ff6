//! Running one analysis from a reconcile: where the variants are, and a Prometheus client with
//! the configured timeout. A Prometheus that cannot even be addressed is an Inconclusive
//! analysis (never a Pass, never a reconcile error), like any other Prometheus failure.
//! The clients come from `prometheus`.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::context::Context;
use super::error::{Error, Result};
use super::observe::fetch::Fetched;
use super::observe::observations::{cpu_limits, variant_cpu_limit};
use super::observe::owner::owned_by;

use crate::analysis::{
    self, AnalysisContext, CandidateToJudge, SelectionAnalysis, SelectionContext,
};
use crate::api::{
    AnalysisRecord, BaselinesMeasured, ConcurrencyExperiment, ConcurrencyExperimentStatus, Verdict,
};
use crate::plan::{self, AnalysisOutcome, SelectionObservations};
use crate::workload;

/// Where the analysis looks, or `None` when the target is gone (nothing to compare).
pub fn analysis_context(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    effective_weight: i32,
    now: Timestamp,
) -> Result<Option<AnalysisContext>> {
    let Some(target) = &fetched.target else {
        return Ok(None);
    };
    let name = exp.spec.container.as_deref();
    let container = workload::app_container(target, name)?;
    let (baseline_cpu_limit, candidate_cpu_limit) = cpu_limits(exp, container);
    let baseline = match fresh_beside(exp, fetched, status) {
        Some(fresh) => fresh.name_any(),
        None => target.name_any(),
    };
    Ok(Some(AnalysisContext {
        namespace: exp.namespace().ok_or(Error::MissingNamespace)?,
        container: container.name.clone(),
        baseline_deployment: baseline,
        candidate_deployment: workload::candidate_name(&target.name_any()),
        stage_index: status.stage_index.unwrap_or_default(),
        stage_started_at: status.stage_started_at.as_ref().map(|t| t.0),
        weight: effective_weight,
        now,
        baseline_config: workload::read_baseline(target, name, &fetched.configmaps).ok(),
        baseline_cpu_limit,
        candidate_cpu_limit,
        candidate_server: Some(exp.spec.walked_candidate(Some(status)).clone()),
    }))
}

/// The fresh baseline the stage judges the candidate against (docs/selection.md): the
/// experiment's own, copied from the target's template as it is, with ready pods, at a stage
/// that keeps one beside the candidate. Otherwise the long-running target is the baseline.
fn fresh_beside<'a>(
    exp: &ConcurrencyExperiment,
    fetched: &'a Fetched,
    status: &ConcurrencyExperimentStatus,
) -> Option<&'a k8s_openapi::api::apps::v1::Deployment> {
    let target = fetched.target.as_ref()?;
    let original = status.original.as_ref()?.replicas;
    let stage = usize::try_from(status.stage_index?).ok()?;
    let weight = exp.spec.stages.get(stage)?.weight;
    plan::fresh_baseline(&exp.spec, original, weight)?;
    fetched.variants.fresh_baseline.as_ref().filter(|f| {
        owned_by(*f, exp)
            && workload::copies_target_template(f, target)
            && workload::rollout_state(f).ready_replicas > 0
    })
}

/// Where a selection's interval looks, or `None` when the target is gone: each candidate
/// observed and not eliminated, against the fresh baseline.
pub fn selection_context(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    observed: &SelectionObservations,
    now: Timestamp,
) -> Result<Option<SelectionContext>> {
    let Some(base) = analysis_context(exp, fetched, status, 0, now)? else {
        return Ok(None);
    };
    let target = base.baseline_deployment.clone();
    let eliminated = |i: usize| {
        status
            .selection
            .as_ref()
            .and_then(|s| s.variants.get(i))
            .is_some_and(|v| v.eliminated.is_some())
    };
    let candidates = exp
        .spec
        .candidate_list()
        .iter()
        .enumerate()
        .filter(|(i, _)| !eliminated(*i))
        .filter_map(|(i, config)| {
            let seen = observed.candidates.get(i)?;
            seen.deployment.as_ref()?;
            Some(CandidateToJudge {
                index: i,
                deployment: workload::variant_name(&target, i),
                config: config.clone(),
                cpu_limit: variant_cpu_limit(config, base.baseline_cpu_limit),
                weight: seen.share,
            })
        })
        .collect();
    Ok(Some(SelectionContext {
        base: AnalysisContext {
            baseline_deployment: workload::fresh_baseline_name(&target),
            weight: observed.fresh_baseline.share,
            ..base
        },
        target_deployment: target,
        candidates,
    }))
}

/// One interval of a selection (`plan::next_analysis_at` says when), and both baselines'
/// values of it.
pub async fn run_selection(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    observed: &SelectionObservations,
    now: Timestamp,
) -> Result<Option<(SelectionAnalysis, Option<BaselinesMeasured>)>> {
    let Some(sctx) = selection_context(exp, fetched, status, observed, now)? else {
        return Ok(None);
    };
    let (client, url) =
        ctx.prometheus
            .for_experiment(exp, ctx.settings.prometheus_timeout, &ctx.metrics);
    let (mut a, baselines) = match client {
        Ok(client) => {
            let a = analysis::analyse_selection(&client, &exp.spec, &sctx).await;
            let target = &sctx.target_deployment;
            let checks = analysis::baseline_values(&client, &exp.spec, &sctx.base, target).await;
            (
                a,
                Some(BaselinesMeasured {
                    at: Time(now),
                    checks,
                }),
            )
        }
        Err(e) => (
            analysis::unreachable_selection(&sctx, &format!("Prometheus {url}: {e}")),
            None,
        ),
    };
    // Every variant's restarts, as the single candidate's: a killed variant fails its interval
    // (and is eliminated as any failing variant is), whatever Prometheus said.
    let since = status.last_analysis_at.as_ref().map(|t| t.0);
    for c in &mut a.candidates {
        let deployment = fetched
            .variants
            .candidates
            .get(c.index)
            .and_then(Option::as_ref);
        let outcome = c.outcome.clone();
        c.outcome =
            judged_restarts(ctx, exp, deployment, &sctx.base.container, since, outcome).await;
    }
    Ok(Some((a, baselines)))
}

/// The analysis with the restarts of `deployment`'s app container judged (`failOnRestart`).
async fn judged_restarts(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    deployment: Option<&k8s_openapi::api::apps::v1::Deployment>,
    container: &str,
    since: Option<Timestamp>,
    outcome: AnalysisOutcome,
) -> AnalysisOutcome {
    let restarts = match deployment {
        Some(d) => super::observe::pods::restarts(&ctx.client, d, container, since).await,
        None => Err("the Deployment is gone".to_string()),
    };
    let fail = exp.spec.analysis.fail_on_restart;
    analysis::judge_restarts(outcome, restarts, container, fail)
}

pub async fn run(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    effective_weight: i32,
    now: Timestamp,
) -> Result<Option<(AnalysisOutcome, Option<BaselinesMeasured>)>> {
    let Some(actx) = analysis_context(exp, fetched, status, effective_weight, now)? else {
        return Ok(None);
    };
    let (client, url) =
        ctx.prometheus
            .for_experiment(exp, ctx.settings.prometheus_timeout, &ctx.metrics);
    let mut baselines = None;
    let outcome = match client {
        Ok(client) => {
            let (history, reference) = (&status.analyses, &status.baseline_reference);
            let target = fetched.target.as_ref().map(|t| t.name_any());
            // Against a fresh baseline: the long-running target's values beside it.
            if let Some(target) = target.filter(|t| *t != actx.baseline_deployment) {
                let checks = analysis::baseline_values(&client, &exp.spec, &actx, &target).await;
                baselines = Some(BaselinesMeasured {
                    at: Time(now),
                    checks,
                });
            }
            let outcome = analysis::analyse(&client, &exp.spec, &actx, history, reference).await;
            analysis::check_workers(&client, &exp.spec, &actx, outcome).await
        }
        Err(e) => AnalysisOutcome {
            record: AnalysisRecord {
                at: Time(now),
                stage_index: actx.stage_index,
                weight: actx.weight,
                verdict: Verdict::Inconclusive,
                baseline_requests: None,
                candidate_requests: None,
                checks: Vec::new(),
                reason: Some(format!("Prometheus {url}: {e}")),
                capacity: None,
            },
            recommendation: None,
            no_data: false,
            queries: Default::default(),
        },
    };
    // Also when Prometheus failed: a killed candidate is a failure Prometheus need not confirm.
    let since = status.analyses.last().map(|a| a.at.0);
    let candidate = fetched.candidate.as_ref();
    let outcome = judged_restarts(ctx, exp, candidate, &actx.container, since, outcome).await;
    Ok(Some((outcome, baselines)))
}
