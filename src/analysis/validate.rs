//! What in `spec.analysis` only this module can judge: templates, queries, metric names and
//! limits, checked before any traffic moves.

use crate::api::{
    parse_duration, parse_percent, Analysis, Check, MetricNames, QuantityError, MAX_MIN_SAMPLES,
};

use super::capacity_queries::{
    busiest_pod_rate_template, cpu_per_request_template, io_per_request_template,
};
use super::judge::Limits;
use super::queries::{builtin_template, is_headroom, validate_names, QueryError};
use super::template::{pods_regex_any, render, TemplateError, TemplateVars};

/// A spec problem the schema cannot catch: a bad template, query, metric name or limit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisSpecError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A check's query template, with the field of that check.
    #[error("spec.analysis.checks[{index}].query: {source}")]
    CheckTemplate { index: usize, source: TemplateError },
    #[error(
        "spec.analysis.checks[{index}]{field}: check {check}: not valid PromQL once the template \
         variables are filled in: {message}"
    )]
    PromQl {
        index: usize,
        /// `.query` for a custom check; empty for a built-in one (its metric names are wrong).
        field: &'static str,
        check: String,
        message: String,
    },
    #[error(
        "spec.analysis.statistical.minSamples: {value} is more than the {max} samples there can \
         be (the last {kept} analyses kept in status and the current one), so the test would \
         never run"
    )]
    MinSamples { value: i32, max: i32, kept: i32 },
    /// The name of an entry the analysis adds itself (`restarts`, `workers`).
    #[error(
        "spec.analysis.checks[{index}].name: {name:?} is the name of an entry the operator adds \
         to analyses itself ({rule}); name the check differently"
    )]
    ReservedName {
        index: usize,
        name: &'static str,
        rule: &'static str,
    },
}

impl AnalysisSpecError {
    pub fn category(&self) -> &'static str {
        match self {
            AnalysisSpecError::Quantity(_) => "InvalidQuantity",
            AnalysisSpecError::Template(e) => e.category(),
            AnalysisSpecError::CheckTemplate { source, .. } => source.category(),
            AnalysisSpecError::Query(e) => e.category(),
            AnalysisSpecError::PromQl { .. } => "InvalidPromQL",
            AnalysisSpecError::MinSamples { .. } => "InvalidStatistical",
            AnalysisSpecError::ReservedName { .. } => "ReservedCheckName",
        }
    }
}

/// The check's query template (built-in or custom).
pub fn check_template(check: &Check, names: &MetricNames) -> Result<String, AnalysisSpecError> {
    match (&check.query, check.metric) {
        (Some(q), _) => Ok(q.clone()),
        (None, Some(m)) => Ok(builtin_template(m, check.quantile, names)?),
        (None, None) => Err(QueryError::BadName {
            field: "checks",
            value: check.display_name(),
            kind: "check (neither metric nor query)",
        }
        .into()),
    }
}

/// Everything in `spec.analysis` that only this code can judge, for `phase: Invalid`. Runs
/// before any traffic moves: a query that cannot run would make every analysis Inconclusive
/// and end in a rollback for nothing.
pub fn validate(analysis: &Analysis) -> Result<(), AnalysisSpecError> {
    let interval = parse_duration("spec.analysis.interval", &analysis.interval)?;
    let names = analysis.metrics.resolve();
    validate_names(&names)?;
    let r = &analysis.recommendation;
    parse_percent("spec.analysis.recommendation.minGain", &r.min_gain)?;
    parse_percent("spec.analysis.recommendation.asyncAbove", &r.async_above)?;
    if let Some(s) = analysis.statistical.as_ref() {
        if s.min_samples > MAX_MIN_SAMPLES {
            return Err(AnalysisSpecError::MinSamples {
                value: s.min_samples,
                max: MAX_MIN_SAMPLES,
                kept: MAX_MIN_SAMPLES - 1,
            });
        }
    }
    // Values shaped like the real ones: the pod regex is what Prometheus will have to compile.
    let placeholders = TemplateVars {
        namespace: "namespace".into(),
        pods: pods_regex_any(&["deployment", "deployment-candidate"]),
        interval,
        window: interval,
        container: "container".into(),
    };
    for (index, check) in analysis.checks.iter().enumerate() {
        let name = check.display_name();
        if let Some(&reserved) = crate::api::RULE_CHECKS.iter().find(|r| **r == name) {
            let rule = match reserved {
                crate::api::RESTARTS_CHECK => "analysis.failOnRestart",
                _ => "analysis.failOnWorkerMismatch",
            };
            return Err(AnalysisSpecError::ReservedName {
                index,
                name: reserved,
                rule,
            });
        }
        Limits::from_check(check)?;
        if is_headroom(check) {
            // No query of its own: the capacity model's must be possible.
            cpu_per_request_template(&names)?;
            io_per_request_template(&names)?;
            busiest_pod_rate_template(&names)?;
            continue;
        }
        let name = check.display_name();
        let template = check_template(check, &names)?;
        let query = render(&name, &template, &placeholders)
            .map_err(|source| AnalysisSpecError::CheckTemplate { index, source })?;
        promql_parser::parser::parse(&query).map_err(|e| AnalysisSpecError::PromQl {
            index,
            field: if check.query.is_some() { ".query" } else { "" },
            check: name.clone(),
            message: e.split_whitespace().collect::<Vec<_>>().join(" "),
        })?;
    }
    Ok(())
}
