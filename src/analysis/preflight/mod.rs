//! The pre-flight series lookup: before anything is created, every check's series must exist
//! for the target's pods — a misspelt metric or a missing exporter would otherwise show up
//! `inconclusiveLimit` intervals later, as a rollback after traffic moved.
//!
//! Pure in three steps: `plan` says which series each check reads (the built-in checks' metric
//! names, the selectors of a custom query's parsed PromQL) and which lookups tell them apart;
//! `look_up` asks a `MetricSource` (the only I/O); `judge` decides per check and `outcome` for
//! the experiment. `kubectl concurrency init` runs the same three.
//!
//! A lookup is `count(last_over_time(SELECTOR[1h]))`. Counters, histograms and gauges, once an
//! exporter created them, are written at every scrape for the life of the process, so any
//! range of a few scrapes finds them; an hour also covers the Deployment's pods replaced in
//! the last hour (the pod regex matches every ReplicaSet's pods) and a scrape outage, and
//! reads only the matched series' samples.
//!
//! Absence proves "never existed" only when the series would be there by now:
//! - series an exporter writes from its first scrape (Puma's gauges) and cAdvisor's: once
//!   Prometheus has scraped the target's pods for `SETTLE` (their `up` series, offset by it);
//! - series that appear with the first request (labelled request counters and histograms —
//!   yabeda creates a label set when it first occurs), and custom queries' series: also only
//!   once the pods served a request (a request counter or duration count of any preset above
//!   0 — an unlabelled histogram is there from the first scrape with a count of 0).
//!
//! Otherwise the lookup cannot tell, and the experiment starts with what it could not check
//! noted (traffic may only come with the experiment). Only the series a check
//! cannot do without are looked up: `errorRate` needs the request counter, not its 5xx series
//! (which a healthy app never has), and selectors under `or` or `absent()` in a custom query
//! are the query's own way of handling absence.

use std::collections::{BTreeMap, BTreeSet};

use futures::{stream, StreamExt, TryStreamExt};
use jiff::Timestamp;
use promql_parser::parser;

use crate::api::{format_duration, Analysis, BuiltinMetric, MetricNames, MetricPreset};

use super::queries::is_headroom;
use super::queue_header::{judges_queue_time, read_clock, CoarseClock};
use super::source::{MetricSource, PrometheusError};

use super::template::{pods_regex, render, TemplateVars};
use super::validate::AnalysisSpecError;

mod judge;
mod needs;
mod series;
pub use judge::{judge, outcome, Finding, Preflight};
use needs::{builtin_needs, custom_selectors, ALL_PRESETS};
use series::{lookup, selector};
pub use series::{Appears, Need, Series, Target, Windows, LOOKBACK, SETTLE};

/// Lookups in flight at once (as the analyses: Prometheus queues beyond its concurrency).
const IN_FLIGHT: usize = 4;

/// A check (or the capacity gate) and what it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckNeeds {
    pub check: String,
    pub needs: Vec<Need>,
}

/// Every lookup of one pre-flight.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub deployment: String,
    pub windows: Windows,
    pub checks: Vec<CheckNeeds>,
    /// `up` of the target's pods before `SETTLE`: Prometheus has scraped them long enough.
    pub scraped: String,
    /// Request counters and duration counts of every preset (and the spec's names), each with
    /// the preset that writes it: any one found means the pods served requests.
    pub requests: Vec<(String, Option<MetricPreset>, String)>,
}

impl Plan {
    /// Every distinct query, in a stable order.
    pub fn queries(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let all = self
            .checks
            .iter()
            .flat_map(|c| c.needs.iter())
            .flat_map(|n| n.any_of.iter())
            .map(|s| s.query.clone())
            .chain([self.scraped.clone()])
            .chain(self.requests.iter().map(|(q, _, _)| q.clone()));
        all.filter(|q| seen.insert(q.clone())).collect()
    }
}

/// Which lookups found a series.
pub type Found = BTreeMap<String, bool>;

/// Every lookup of a pre-flight for `analysis` on `target`. Errors are the spec's own
/// (`analysis::validate` refuses them first).
pub fn plan(analysis: &Analysis, target: &Target) -> Result<Plan, AnalysisSpecError> {
    let names = analysis.metrics.resolve();
    let preset = analysis.metrics.preset;
    let t = target;
    let mut checks = Vec::new();
    if analysis.min_requests > 0 {
        // Every analysis counts each variant's requests before it judges anything.
        checks.push(CheckNeeds {
            check: "minRequests".into(),
            needs: builtin_needs(BuiltinMetric::ErrorRate, &names, preset, t),
        });
    }
    let interval = crate::api::parse_duration("spec.analysis.interval", &analysis.interval)?;
    let vars = TemplateVars {
        namespace: t.namespace.clone(),
        pods: pods_regex(&t.deployment),
        interval,
        window: interval,
        container: t.container.clone(),
    };
    for (index, check) in analysis.checks.iter().enumerate() {
        let name = check.display_name();
        let needs = match (&check.query, check.metric) {
            (Some(q), _) => {
                let query = render(&name, q, &vars)
                    .map_err(|source| AnalysisSpecError::CheckTemplate { index, source })?;
                let expr = parser::parse(&query).map_err(|e| AnalysisSpecError::PromQl {
                    index,
                    field: ".query",
                    check: name.clone(),
                    message: e,
                })?;
                let mut selectors = Vec::new();
                custom_selectors(&expr, &mut selectors);
                selectors.dedup();
                selectors
                    .into_iter()
                    .map(|s| Need {
                        any_of: vec![Series {
                            metric: s.clone(),
                            query: lookup(&s, &t.windows),
                            appears: Appears::WithRequests,
                            writer: "the exporter your query reads".into(),
                        }],
                        instead: format!(
                            "fix the metric name or labels in spec.analysis.checks[{index}].query, \
                             or drop the check"
                        ),
                    })
                    .collect()
            }
            (None, Some(m)) => builtin_needs(m, &names, preset, t),
            (None, None) => Vec::new(),
        };
        if is_headroom(check) || !needs.is_empty() {
            checks.push(CheckNeeds { check: name, needs });
        }
    }
    let gate_on = crate::api::max_predicted_utilization(analysis)
        .ok()
        .flatten()
        .is_some();
    if gate_on {
        let mut needs = builtin_needs(BuiltinMetric::Headroom, &names, preset, t);
        for n in &mut needs {
            n.instead = n.instead.replace(
                "or drop the check",
                "or set spec.analysis.maxPredictedUtilization: off",
            );
        }
        checks.push(CheckNeeds {
            check: "capacity gate (maxPredictedUtilization)".into(),
            needs,
        });
    }
    let mut requests = Vec::new();
    // Served, not only registered: an unlabelled histogram (gvl-sim's) is written from the
    // first scrape with a count of 0.
    let mut witness = |name: String, preset: Option<MetricPreset>, field: &str| {
        let q = format!(
            "count(max_over_time({}[{}]) > 0)",
            selector(&name, t, false),
            format_duration(t.windows.lookback)
        );
        if !requests.iter().any(|(seen, _, _)| *seen == q) {
            requests.push((q, preset, format!("{field} {name}")));
        }
    };
    witness(names.requests_total.clone(), preset, "requestsTotal");
    witness(
        format!("{}_count", names.request_duration),
        preset,
        "requestDuration",
    );
    for p in ALL_PRESETS {
        let n = MetricNames::of(p);
        witness(n.requests_total, Some(p), "requestsTotal");
        witness(
            format!("{}_count", n.request_duration),
            Some(p),
            "requestDuration",
        );
    }
    let scraped = format!(
        "count(last_over_time({}[{}] offset {}))",
        selector("up", t, false),
        format_duration(t.windows.lookback.saturating_sub(t.windows.settle)),
        format_duration(t.windows.settle)
    );
    Ok(Plan {
        deployment: t.deployment.clone(),
        windows: t.windows,
        checks,
        scraped,
        requests,
    })
}

/// Runs every lookup of `plan` (the only I/O). A Prometheus error ends it: the pre-flight
/// cannot decide and is looked at again, never taken as "missing".
pub async fn look_up(
    source: &impl MetricSource,
    plan: &Plan,
    at: Timestamp,
) -> Result<Found, PrometheusError> {
    let queries = plan.queries();
    // Collected first: a stream over a borrowing closure is not provably `Send` (as in
    // `evaluate`), and the controller runs this on spawned tasks.
    let asks: Vec<_> = queries.iter().map(|q| source.query_value(q, at)).collect();
    // The first error ends the lookup at once: a Prometheus that hangs costs one timeout per
    // lookup, not one per round of queries in flight.
    let answers: Vec<_> = stream::iter(asks).buffered(IN_FLIGHT).try_collect().await?;
    let mut found = Found::new();
    for (q, a) in queries.into_iter().zip(answers) {
        found.insert(q, a.is_some_and(|n| n > 0.0));
    }
    Ok(found)
}

/// How far back the target's request rate is measured for `reach` (issue 30): long enough to
/// smooth a burst, short enough to be today's traffic.
pub const RATE_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// The target's request rate over all its pods (requests/s over the last `RATE_WINDOW`), as
/// `kubectl concurrency init` measures it: what the stages' shares of traffic are cut from.
/// Only when the request counter already existed `RATE_WINDOW` ago: `rate()` divides by the
/// whole window, so a younger series (a target deployed a minute ago, traffic that just
/// began) would read as a fraction of its rate and warn wrongly. `None` then, and when
/// Prometheus has no answer (no requests, no series, an error): nothing to warn on.
pub async fn target_rate(
    source: &impl MetricSource,
    analysis: &Analysis,
    target: &Target,
    at: Timestamp,
) -> Option<f64> {
    use super::queries::{metric, SELECTOR};
    let names = analysis.metrics.resolve();
    // `init`'s own total-rate query (its `{{interval}}` is the window here), kept only for a
    // counter that existed a window ago.
    let total = super::capacity_queries::total_rate_template(&names).ok()?;
    let requests = metric("requestsTotal", &names.requests_total).ok()?;
    let template =
        format!("{total} and on() (count({requests}{{{SELECTOR}}} offset {{{{window}}}}) > 0)");
    let vars = recent(target);
    let query = render("request rate", &template, &vars).ok()?;
    let rate = source.query_value(&query, at).await.ok().flatten()?;
    rate.is_finite().then_some(rate)
}

/// The target's pods over the last `RATE_WINDOW` (interval and window alike).
fn recent(target: &Target) -> TemplateVars {
    TemplateVars {
        namespace: target.namespace.clone(),
        pods: pods_regex(&target.deployment),
        interval: RATE_WINDOW,
        window: RATE_WINDOW,
        container: target.container.clone(),
    }
}

/// The target's queue times over the last `RATE_WINDOW`, when they look like a one-second clock
/// (`queue_header::one_second_clock`) and the spec judges `queueTime`: said before traffic
/// moves, since such a check cannot see the differences it is there for.
pub async fn queue_clock(
    source: &impl MetricSource,
    analysis: &Analysis,
    target: &Target,
    at: Timestamp,
) -> Option<CoarseClock> {
    if !judges_queue_time(&analysis.checks) {
        return None;
    }
    let vars = recent(target);
    read_clock(source, &analysis.metrics.resolve(), &vars, at).await
}

/// The whole pre-flight against `source`: plan, look up, judge.
pub async fn preflight(
    source: &impl MetricSource,
    analysis: &Analysis,
    target: &Target,
    at: Timestamp,
) -> Preflight {
    let plan = match plan(analysis, target) {
        Ok(p) => p,
        Err(e) => return Preflight::Missing(e.to_string()),
    };
    match look_up(source, &plan, at).await {
        Ok(found) => outcome(&judge(&plan, &found, analysis.metrics.preset)),
        Err(e) => Preflight::Unavailable(format!("{} ({})", e, e.category())),
    }
}
