//! One check of one analysis: its values for both variants (`measure_check`: the query
//! rendered per variant and asked at the analysis' time; the headroom check filled in from the
//! capacity measurement), then its verdict (`judge_measured`: the limits, and the statistical
//! comparison over the analyses kept). Any failure is an Inconclusive check with its reason.

use jiff::Timestamp;

use crate::api::{Analysis, AnalysisRecord, Check, CheckResult, MetricNames, Verdict};

use super::judge::{judge_check, Limits, Unit};
use super::queries::{is_headroom, HEADROOM_SOURCE};
use super::source::{MetricSource, PrometheusError};
use super::stats;
use super::summary::variant_queries;
use super::template::TemplateVars;
use super::validate::{check_template, AnalysisSpecError};

type QueryResult = Result<Option<f64>, PrometheusError>;

pub(super) fn describe(variant: &str, e: &PrometheusError) -> String {
    format!("{variant} query failed ({}): {e}", e.category())
}

/// A check's values, before judgement; `limits` is `None` when it could not be measured
/// (the result then already holds its Inconclusive reason).
pub(super) struct Measured {
    pub(super) result: CheckResult,
    pub(super) limits: Option<(Limits, Unit)>,
    /// The candidate's query as sent (the headroom check's source), once rendered.
    pub(super) query: Option<String>,
}

impl Measured {
    /// Prometheus answered, with no sample for the candidate nor (when it still serves) the
    /// baseline. A failed query is not "empty": it says nothing about the metrics.
    pub(super) fn empty(&self, baseline_gone: bool) -> bool {
        self.limits.is_some()
            && self.result.candidate.is_none()
            && (baseline_gone || self.result.baseline.is_none())
    }
}

pub(super) async fn measure_check(
    source: &impl MetricSource,
    names: &MetricNames,
    check: &Check,
    baseline: &TemplateVars,
    candidate: &TemplateVars,
    at: Timestamp,
) -> Measured {
    let name = check.display_name();
    let mut result = CheckResult {
        name: name.clone(),
        baseline: None,
        candidate: None,
        limit: String::new(),
        verdict: Verdict::Inconclusive,
        reason: None,
        evidence: None,
    };
    let unmeasured = |mut result: CheckResult, reason: String| {
        result.reason = Some(reason);
        Measured {
            result,
            limits: None,
            query: None,
        }
    };
    if is_headroom(check) {
        // No query: filled in from the capacity measurement once it is made (`fill_headroom`).
        return match Limits::from_check(check) {
            Ok(limits) => {
                result.limit = limits.written.clone();
                Measured {
                    result,
                    limits: Some((limits, Unit::of(check))),
                    query: Some(HEADROOM_SOURCE.to_string()),
                }
            }
            Err(e) => {
                let e = AnalysisSpecError::from(e);
                unmeasured(result, format!("{} ({})", e, e.category()))
            }
        };
    }
    let prepared = (|| -> Result<(Limits, String), AnalysisSpecError> {
        Ok((Limits::from_check(check)?, check_template(check, names)?))
    })();
    let (limits, template) = match prepared {
        Ok(p) => p,
        Err(e) => return unmeasured(result, format!("{} ({})", e, e.category())),
    };
    let queries = variant_queries(source, check, names, &template, baseline, candidate, at);
    let (base_q, cand_q) = match queries.await {
        Ok(q) => q,
        Err(e) => return unmeasured(result, format!("{} ({})", e, e.category())),
    };
    result.limit = limits.written.clone();
    let (b, c): (QueryResult, QueryResult) = futures::join!(
        source.query_value(&base_q, at),
        source.query_value(&cand_q, at)
    );
    match (b, c) {
        (Err(e), _) => result.reason = Some(describe("baseline", &e)),
        (_, Err(e)) => result.reason = Some(describe("candidate", &e)),
        (Ok(b), Ok(c)) => {
            result.baseline = b;
            result.candidate = c;
            return Measured {
                result,
                limits: Some((limits, Unit::of(check))),
                query: Some(cand_q),
            };
        }
    }
    Measured {
        result,
        limits: None,
        query: Some(cand_q),
    }
}

/// Judges a measured check. The current interval joins the statistical samples only if it
/// had enough requests (`current_counts`), like the past intervals.
pub(super) fn judge_measured(
    measured: Measured,
    analysis: &Analysis,
    history: &[AnalysisRecord],
    current_counts: bool,
) -> CheckResult {
    let Measured {
        mut result, limits, ..
    } = measured;
    let Some((limits, unit)) = limits else {
        return result;
    };
    let (b, c) = (result.baseline, result.candidate);
    let statistical = match (&analysis.statistical, limits.max_increase) {
        (Some(s), Some(share)) => {
            let current = if current_counts { (b, c) } else { (None, None) };
            let (bs, cs) = stats::samples(&result.name, history, analysis.min_requests, current);
            stats::compare(s, share, &bs, &cs)
        }
        _ => None,
    };
    let (verdict, reason) = judge_check(&limits, unit, b, c, statistical.as_ref());
    result.verdict = verdict;
    result.reason = Some(reason);
    result
}
