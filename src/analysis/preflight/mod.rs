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
use super::source::{MetricSource, PrometheusError};

use super::template::{pods_regex, render, TemplateVars};
use super::validate::AnalysisSpecError;

mod needs;
mod series;
use needs::{builtin_needs, custom_selectors, ALL_PRESETS, PRESET_HINT};
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

/// What the lookup says of one check.
#[derive(Clone, Debug, PartialEq)]
pub enum Finding {
    /// Every series it needs exists for the target's pods.
    Found,
    /// A series it needs never existed: the sentence says which, who writes it, what instead
    /// (the check is named beside it).
    Missing(String),
    /// Cannot tell yet: the sentence says why.
    Unknown(String),
}

/// Why the lookups cannot tell yet, if they cannot: the pods not scraped long enough, or (for
/// series that appear with requests) no request served.
fn undecidable(plan: &Plan, found: &Found, appears: Appears) -> Option<String> {
    let has = |q: &str| found.get(q).copied().unwrap_or(false);
    if !has(&plan.scraped) {
        return Some(format!(
            "Prometheus has not scraped the pods of Deployment {} for {} yet (no `up` series \
             with their namespace and pod labels before that)",
            plan.deployment,
            format_duration(plan.windows.settle)
        ));
    }
    let served = plan.requests.iter().any(|(q, _, _)| has(q));
    if appears == Appears::WithRequests && !served {
        let names: Vec<&str> = plan
            .requests
            .iter()
            .map(|(_, _, n)| n.rsplit(' ').next().unwrap_or_default())
            .collect();
        return Some(format!(
            "the pods of Deployment {} served no request in the last {} as far as Prometheus \
             knows (none of {}), and this series appears with the first request",
            plan.deployment,
            format_duration(plan.windows.lookback),
            names.join(", ")
        ));
    }
    None
}

/// The preset whose request series the pods do export, when it is not the spec's.
fn other_preset(plan: &Plan, found: &Found, spec: Option<MetricPreset>) -> Option<MetricPreset> {
    let spec = spec.unwrap_or(MetricPreset::ReferenceApp);
    plan.requests
        .iter()
        .filter(|(q, _, _)| found.get(q).copied().unwrap_or(false))
        .filter_map(|(_, p, _)| *p)
        .find(|p| MetricNames::of(*p).requests_total != MetricNames::of(spec).requests_total)
}

/// Each check's finding, in the plan's order.
pub fn judge(plan: &Plan, found: &Found, preset: Option<MetricPreset>) -> Vec<(String, Finding)> {
    let has = |q: &str| found.get(q).copied().unwrap_or(false);
    plan.checks
        .iter()
        .map(|c| {
            let mut missing = Vec::new();
            let mut unknown = Vec::new();
            for need in &c.needs {
                if need.any_of.iter().any(|s| has(&s.query)) {
                    continue;
                }
                let what: Vec<String> = need
                    .any_of
                    .iter()
                    .map(|s| format!("{} (written by {})", s.metric, s.writer))
                    .collect();
                let what = what.join(" or ");
                // Decided only when every series it could use would be there by now.
                let why = need
                    .any_of
                    .iter()
                    .find_map(|s| undecidable(plan, found, s.appears));
                match why {
                    Some(why) => unknown.push(format!("{what}: {why}")),
                    None => {
                        let instead = match other_preset(plan, found, preset)
                            .filter(|_| need.instead.starts_with(PRESET_HINT))
                        {
                            Some(p) => format!(
                                "the pods export {}'s request series instead: set \
                                 spec.analysis.metrics.preset: {}",
                                p.name(),
                                p.name()
                            ),
                            None => need.instead.clone(),
                        };
                        missing.push(format!(
                            "{what} has no series for the pods of Deployment {} in the last {}; \
                             {instead}",
                            plan.deployment,
                            format_duration(plan.windows.lookback)
                        ));
                    }
                }
            }
            let finding = if !missing.is_empty() {
                Finding::Missing(missing.join("; "))
            } else if !unknown.is_empty() {
                Finding::Unknown(unknown.join("; "))
            } else {
                Finding::Found
            };
            (c.check.clone(), finding)
        })
        .collect()
}

/// The pre-flight's answer for the stage machine (`plan::Observations::preflight`).
#[derive(Clone, Debug, PartialEq)]
pub enum Preflight {
    /// Every check's series exist: go on, and never look again.
    Passed,
    /// Some check's series never existed: the experiment cannot run (`Invalid`).
    Missing(String),
    /// No series is known missing, but some cannot be told yet (the pods scraped for less than
    /// `SETTLE`, or no request served): the experiment starts, noting what was not checked —
    /// waiting for traffic that may only come with the experiment would refuse it wrongly.
    Unchecked(String),
    /// Prometheus failed: look again.
    Unavailable(String),
}

/// The experiment's answer from the checks' findings: any missing series refuses it, else the
/// undecided ones are noted. Checks missing the same series are named together
/// (`check minRequests, errorRate: rails_requests_total …`).
pub fn outcome(findings: &[(String, Finding)]) -> Preflight {
    let grouped = |want: fn(&Finding) -> Option<&String>| {
        let mut groups: Vec<(Vec<&str>, &String)> = Vec::new();
        for (check, f) in findings {
            let Some(text) = want(f) else { continue };
            match groups.iter_mut().find(|(_, t)| *t == text) {
                Some((checks, _)) => checks.push(check),
                None => groups.push((vec![check], text)),
            }
        }
        groups
            .iter()
            .map(|(checks, text)| {
                let s = if checks.len() > 1 { "s" } else { "" };
                format!("check{s} {}: {text}", checks.join(", "))
            })
            .collect::<Vec<_>>()
    };
    let missing = grouped(|f| match f {
        Finding::Missing(m) => Some(m),
        _ => None,
    });
    if !missing.is_empty() {
        return Preflight::Missing(missing.join(". "));
    }
    let unknown = grouped(|f| match f {
        Finding::Unknown(m) => Some(m),
        _ => None,
    });
    if !unknown.is_empty() {
        return Preflight::Unchecked(unknown.join(". "));
    }
    Preflight::Passed
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
