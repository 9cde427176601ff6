//! The pre-flight's verdicts: per check from what the lookups found (`judge`: found, missing
//! with who writes it and what instead, or not decidable yet), and for the experiment
//! (`outcome`).

use crate::api::{format_duration, MetricNames, MetricPreset};

use super::needs::PRESET_HINT;
use super::series::Appears;
use super::{Found, Plan};

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
