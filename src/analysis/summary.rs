//! Quantile checks over a metric that may be a Summary: prometheus_exporter records request
//! and queue durations as Summaries unless its server runs with `--histogram`. A Summary's
//! quantiles are computed in each process and cannot be combined across pods, so the type is
//! looked up per variant first: a histogram is queried as usual, a Summary only for a variant
//! of one pod, and otherwise the check says exactly why it cannot be measured.

use jiff::Timestamp;

use crate::api::{BuiltinMetric, Check, MetricNames};

use super::queries::{
    bucket_count_template, quantile_metric, summary_pods_template, summary_quantile_template,
    QueryError,
};
use super::source::{MetricSource, PrometheusError};
use super::template::{render, TemplateError, TemplateVars};

/// Why a quantile check over a Summary cannot be measured for a variant.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error(
        "spec.analysis.metrics.{field} {name} is a Summary (prometheus_exporter without --histogram) and the \
         {variant} has {pods} pods: a Summary's quantiles cannot be combined across pods. Run \
         prometheus_exporter with --histogram, or give the {variant} one pod"
    )]
    AcrossPods {
        field: &'static str,
        name: String,
        variant: &'static str,
        pods: f64,
    },
    #[error(
        "spec.analysis.metrics.{field} {name} is a Summary without a quantile=\"{quantile}\" series for the \
         {variant} (prometheus_exporter's defaults are 0.99, 0.9, 0.5, 0.1 and 0.01): set the check's \
         quantile to one of those, or run prometheus_exporter with --histogram"
    )]
    MissingQuantile {
        field: &'static str,
        name: String,
        variant: &'static str,
        quantile: f64,
    },
    #[error("{variant} query failed ({}): {source}", source.category())]
    Prometheus {
        variant: &'static str,
        source: PrometheusError,
    },
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Template(#[from] TemplateError),
}

impl SummaryError {
    pub fn category(&self) -> &'static str {
        match self {
            SummaryError::AcrossPods { .. } => "SummaryAcrossPods",
            SummaryError::MissingQuantile { .. } => "SummaryQuantileMissing",
            SummaryError::Prometheus { source, .. } => source.category(),
            SummaryError::Query(e) => e.category(),
            SummaryError::Template(e) => e.category(),
        }
    }
}

/// The baseline's and the candidate's query for `check` from its `template`: rendered as is,
/// unless the check is a quantile over a metric that may be a Summary (then per variant, by
/// the type Prometheus has).
pub(super) async fn variant_queries(
    source: &impl MetricSource,
    check: &Check,
    names: &MetricNames,
    template: &str,
    baseline: &TemplateVars,
    candidate: &TemplateVars,
    at: Timestamp,
) -> Result<(String, String), SummaryError> {
    let (b, c) = futures::join!(
        variant_query(source, check, names, template, baseline, "baseline", at),
        variant_query(source, check, names, template, candidate, "candidate", at)
    );
    Ok((b?, c?))
}

/// One variant's query for `check`, as an analysis at `at` sends it (the report redraws a
/// check's history with it).
pub async fn check_query(
    source: &impl MetricSource,
    check: &Check,
    names: &MetricNames,
    vars: &TemplateVars,
    variant: &'static str,
    at: Timestamp,
) -> Result<String, String> {
    let template = super::validate::check_template(check, names).map_err(|e| e.to_string())?;
    variant_query(source, check, names, &template, vars, variant, at)
        .await
        .map_err(|e| e.to_string())
}

/// One variant's query from `template`: as is, or by the type Prometheus has for it.
async fn variant_query(
    source: &impl MetricSource,
    check: &Check,
    names: &MetricNames,
    template: &str,
    vars: &TemplateVars,
    variant: &'static str,
    at: Timestamp,
) -> Result<String, SummaryError> {
    let name = check.display_name();
    let probe = match check.metric {
        Some(m) if names.may_be_summaries && check.query.is_none() => quantile_metric(m, names)
            .transpose()?
            .map(|metric| (m, metric)),
        _ => None,
    };
    let Some((which, (field, metric))) = probe else {
        return Ok(render(&name, template, vars)?);
    };
    let probe = Probe {
        source,
        name: &name,
        which,
        quantile: check.quantile,
        field,
        metric,
        at,
    };
    probe.query(template, vars, variant).await
}

struct Probe<'a, S> {
    source: &'a S,
    name: &'a str,
    which: BuiltinMetric,
    quantile: Option<f64>,
    field: &'static str,
    metric: &'a str,
    at: Timestamp,
}

impl<S: MetricSource> Probe<'_, S> {
    async fn value(
        &self,
        template: &str,
        vars: &TemplateVars,
        variant: &'static str,
    ) -> Result<Option<f64>, SummaryError> {
        let q = render(self.name, template, vars)?;
        self.source
            .query_value(&q, self.at)
            .await
            .map_err(|source| SummaryError::Prometheus { variant, source })
    }

    async fn query(
        &self,
        histogram: &str,
        vars: &TemplateVars,
        variant: &'static str,
    ) -> Result<String, SummaryError> {
        let buckets = self
            .value(&bucket_count_template(self.metric), vars, variant)
            .await?;
        let pods = match buckets {
            Some(n) if n > 0.0 => None,
            _ => {
                self.value(&summary_pods_template(self.metric), vars, variant)
                    .await?
            }
        };
        // A histogram, or nothing at all yet: the usual query (no data is Inconclusive there).
        let Some(pods) = pods.filter(|p| *p > 0.0) else {
            return Ok(render(self.name, histogram, vars)?);
        };
        if pods > 1.0 {
            return Err(SummaryError::AcrossPods {
                field: self.field,
                name: self.metric.to_string(),
                variant,
                pods,
            });
        }
        let (q, template) = summary_quantile_template(self.which, self.quantile, self.metric)?;
        if self
            .value(&format!("count({template})"), vars, variant)
            .await?
            .is_none()
        {
            return Err(SummaryError::MissingQuantile {
                field: self.field,
                name: self.metric.to_string(),
                variant,
                quantile: q,
            });
        }
        Ok(render(self.name, &template, vars)?)
    }
}
