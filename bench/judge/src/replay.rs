//! One experiment replayed over a trace: the manifest's stages and interval cut the trace into
//! analyses, and a judge decides after each one — the operator's per-interval rule (its own
//! `judge_check`, `aggregate` and limits) or the anytime-valid tests.

use anyhow::{bail, Context};
use concurrency_operator::analysis::sequential::{rate, Buckets, Direction, QuantileTest};
use concurrency_operator::analysis::{aggregate, judge_check, Limits, Unit};
use concurrency_operator::api::{
    parse_duration, BuiltinMetric, Check, CheckResult, ConcurrencyExperimentSpec, Verdict,
};

use crate::trace::{histogram_quantile, Interval, Trace};

/// Queue times up to this are no queueing (the operator's `QUEUE_TIME_FLOOR`).
const QUEUE_FLOOR: f64 = 0.010;

/// What the replay needs of a manifest.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub interval_seconds: u64,
    /// Analyses in each stage (its duration over the interval, at least one).
    pub analyses: Vec<usize>,
    /// The checks the traces have data for, each with its limits (read once).
    pub checks: Vec<Judged>,
    /// Checks left out, with why.
    pub skipped: Vec<String>,
    pub failure_limit: i32,
    pub inconclusive_limit: i32,
    pub min_requests: i64,
}

impl Plan {
    pub fn from_spec(name: &str, spec: &ConcurrencyExperimentSpec) -> anyhow::Result<Plan> {
        let a = &spec.analysis;
        let interval = parse_duration("spec.analysis.interval", &a.interval)?.as_secs();
        if interval == 0 {
            bail!("{name}: interval 0");
        }
        let analyses = spec
            .stages
            .iter()
            .map(|s| {
                let d = parse_duration("spec.stages[].duration", &s.duration)?.as_secs();
                Ok((d / interval).max(1) as usize)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let (mut checks, mut skipped) = (Vec::new(), Vec::new());
        for c in &a.checks {
            match c.metric {
                Some(
                    BuiltinMetric::Latency
                    | BuiltinMetric::QueueTime
                    | BuiltinMetric::ErrorRate
                    | BuiltinMetric::Memory,
                ) => checks.push(Judged {
                    limits: Limits::from_check(c).with_context(|| name.to_string())?,
                    check: c.clone(),
                }),
                _ => skipped.push(format!("{} (not in the traces)", c.display_name())),
            }
        }
        Ok(Plan {
            name: name.into(),
            interval_seconds: interval,
            analyses,
            checks,
            skipped,
            failure_limit: a.failure_limit,
            inconclusive_limit: a.inconclusive_limit,
            min_requests: a.min_requests,
        })
    }

    pub fn total_analyses(&self) -> usize {
        self.analyses.iter().sum()
    }
}

/// A check and its limits in base units.
#[derive(Debug, Clone)]
pub struct Judged {
    pub check: Check,
    pub limits: Limits,
}

/// Which judge decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// The operator today: each check's limits on each interval's values; failed analyses
    /// beyond `failureLimit` (or inconclusive ones beyond `inconclusiveLimit`) roll back.
    PerInterval,
    /// Anytime-valid tests on everything since the start, `alpha` split over the tests; the
    /// `memory` check (a gauge, no distribution) keeps the per-interval rule.
    Sequential { alpha: f64 },
}

impl Rule {
    pub fn label(&self) -> String {
        match self {
            Rule::PerInterval => "per-interval (today)".into(),
            Rule::Sequential { alpha } => format!("anytime-valid, α {alpha}"),
        }
    }
}

/// How one replay ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The analysis (1-based) after which it rolled back.
    pub rolled_back_at: Option<usize>,
    /// Rolled back for inconclusive analyses rather than a failed check.
    pub inconclusive: bool,
    /// Requests per variant (the smaller) up to the decision or the end.
    pub requests: f64,
    /// The checks that decided it.
    pub why: Vec<String>,
}

fn quantile_of(check: &Check) -> f64 {
    check.quantile.unwrap_or(0.99)
}

/// A check's value for one variant over one interval, as the operator's query would read it.
fn value(check: &Check, trace: &Trace, i: &Interval) -> Option<f64> {
    match check.metric? {
        BuiltinMetric::Latency => {
            histogram_quantile(quantile_of(check), &trace.latency_bounds, &i.latency)
        }
        BuiltinMetric::QueueTime => {
            histogram_quantile(quantile_of(check), &trace.queue_bounds, &i.queue)
        }
        BuiltinMetric::ErrorRate => (i.requests > 0.0).then(|| i.errors / i.requests),
        BuiltinMetric::Memory => (i.memory > 0.0).then_some(i.memory),
        _ => None,
    }
}

/// The operator's verdicts on one interval: its `judge_check` per check, then `aggregate`.
fn per_interval<'a>(
    checks: impl Iterator<Item = &'a Judged>,
    min_requests: i64,
    trace: &Trace,
    b: &Interval,
    c: &Interval,
) -> (Verdict, Vec<String>) {
    let checks: Vec<CheckResult> = checks
        .map(|Judged { check, limits }| {
            let (verdict, reason) = judge_check(
                limits,
                Unit::of(check),
                value(check, trace, b),
                value(check, trace, c),
                None,
            );
            CheckResult {
                name: check.display_name(),
                baseline: None,
                candidate: None,
                limit: limits.written.clone(),
                verdict,
                reason: Some(reason),
            }
        })
        .collect();
    let (verdict, _) = aggregate(&checks, Some(b.requests), Some(c.requests), min_requests);
    let failed = checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| c.name.clone())
        .collect();
    (verdict, failed)
}

fn buckets(bounds: &[f64], cumulative: &[f64]) -> Buckets {
    let mut pairs: Vec<(f64, f64)> = bounds
        .iter()
        .copied()
        .zip(cumulative.iter().copied())
        .collect();
    if let Some(total) = cumulative.get(bounds.len()) {
        pairs.push((f64::INFINITY, *total));
    }
    Buckets::from_pairs(pairs)
}

/// The baseline's queue times below the floor counted as the floor: "no queueing" is
/// compared as the floor, as the per-interval rule does. Buckets below it go; a bound just
/// under it with no requests keeps the interpolation from reading any below it.
fn floored(b: Buckets) -> Buckets {
    let keep = b.bounds.partition_point(|le| *le < QUEUE_FLOOR);
    let mut bounds = vec![QUEUE_FLOOR * (1.0 - 1e-9)];
    let mut cumulative = vec![0.0];
    bounds.extend_from_slice(&b.bounds[keep..]);
    cumulative.extend_from_slice(&b.cumulative[keep..]);
    if !bounds[1..].iter().any(|le| *le >= QUEUE_FLOOR) {
        // No bound at or above the floor: everything is at most the floor.
        bounds.push(QUEUE_FLOOR);
        cumulative.push(b.total);
    }
    Buckets {
        bounds,
        cumulative,
        total: b.total,
    }
}

/// One sequential test of one check: its `ln` e-value now.
struct SequentialTest<'a> {
    check: &'a Check,
    kind: TestKind,
}

enum TestKind {
    QuantileRatio(f64),
    QuantileMax(f64),
    RateRatio(f64),
    RateMax(f64),
}

fn sequential_tests(plan: &Plan) -> Vec<SequentialTest<'_>> {
    let mut tests = Vec::new();
    for Judged { check, limits } in &plan.checks {
        let metric = check.metric;
        let quantile = matches!(
            metric,
            Some(BuiltinMetric::Latency | BuiltinMetric::QueueTime)
        );
        let errors = metric == Some(BuiltinMetric::ErrorRate);
        if !(quantile || errors) {
            continue;
        }
        if let Some(share) = limits.max_increase {
            let kind = if quantile {
                TestKind::QuantileRatio(1.0 + share)
            } else {
                TestKind::RateRatio(1.0 + share)
            };
            tests.push(SequentialTest { check, kind });
        }
        if let Some(max) = limits.max {
            let kind = if quantile {
                TestKind::QuantileMax(max)
            } else {
                TestKind::RateMax(max)
            };
            tests.push(SequentialTest { check, kind });
        }
    }
    tests
}

/// Requests per variant at which the tests are tuned: about what a stage brings.
const N_OPT: f64 = 1000.0;

fn evidence(
    test: &SequentialTest,
    trace: &Trace,
    b: &Interval,
    c: &Interval,
    history: &[(Interval, Interval)],
) -> f64 {
    let q = QuantileTest::new(quantile_of(test.check), N_OPT);
    let queue = test.check.metric == Some(BuiltinMetric::QueueTime);
    let (bounds, bc, cc) = if queue {
        (&trace.queue_bounds, &b.queue, &c.queue)
    } else {
        (&trace.latency_bounds, &b.latency, &c.latency)
    };
    match test.kind {
        TestKind::QuantileRatio(ratio) => {
            let base = buckets(bounds, bc);
            let base = if queue { floored(base) } else { base };
            q.log_evidence(&base, &buckets(bounds, cc), ratio, Direction::Worse)
        }
        TestKind::QuantileMax(max) => q.log_evidence_above(&buckets(bounds, cc), max),
        TestKind::RateRatio(ratio) => {
            let counts: Vec<rate::Counts> = history
                .iter()
                .map(|(b, c)| rate::Counts {
                    baseline_requests: b.requests,
                    baseline_errors: b.errors,
                    candidate_requests: c.requests,
                    candidate_errors: c.errors,
                })
                .collect();
            rate::log_evidence(&counts, ratio, Direction::Worse)
        }
        TestKind::RateMax(max) => rate::log_evidence_above(c.requests, c.errors, max, N_OPT),
    }
}

/// Replays one experiment over `intervals` (baseline, candidate), one per analysis.
pub fn run(plan: &Plan, rule: Rule, trace: &Trace, intervals: &[(Interval, Interval)]) -> Outcome {
    let (mut failed, mut inconclusive) = (0, 0);
    let (mut total_b, mut total_c) = (Interval::default(), Interval::default());
    let tests = sequential_tests(plan);
    for (n, (b, c)) in intervals.iter().enumerate() {
        total_b.add(b);
        total_c.add(c);
        let requests = total_b.requests.min(total_c.requests);
        let decided = |why: Vec<String>, inconclusive: bool| Outcome {
            rolled_back_at: Some(n + 1),
            inconclusive,
            requests,
            why,
        };
        match rule {
            Rule::PerInterval => {
                let (verdict, why) =
                    per_interval(plan.checks.iter(), plan.min_requests, trace, b, c);
                match verdict {
                    Verdict::Fail => {
                        failed += 1;
                        if failed > plan.failure_limit {
                            return decided(why, false);
                        }
                    }
                    Verdict::Inconclusive => {
                        inconclusive += 1;
                        if inconclusive > plan.inconclusive_limit {
                            return decided(vec!["inconclusive".into()], true);
                        }
                    }
                    Verdict::Pass => {}
                }
            }
            Rule::Sequential { alpha } => {
                let threshold = (tests.len().max(1) as f64 / alpha).ln();
                let history = &intervals[..=n];
                let why: Vec<String> = tests
                    .iter()
                    .filter(|t| evidence(t, trace, &total_b, &total_c, history) >= threshold)
                    .map(|t| t.check.display_name())
                    .collect();
                if !why.is_empty() {
                    return decided(why, false);
                }
                // The memory check keeps the per-interval rule.
                let memory = plan
                    .checks
                    .iter()
                    .filter(|j| j.check.metric == Some(BuiltinMetric::Memory));
                if memory.clone().next().is_some() {
                    if let (Verdict::Fail, why) =
                        per_interval(memory, plan.min_requests, trace, b, c)
                    {
                        failed += 1;
                        if failed > plan.failure_limit {
                            return decided(why, false);
                        }
                    }
                }
            }
        }
    }
    Outcome {
        rolled_back_at: None,
        inconclusive: false,
        requests: total_b.requests.min(total_c.requests),
        why: Vec::new(),
    }
}

/// A manifest file's spec (the first `ConcurrencyExperiment` in it).
pub fn load_spec(path: &std::path::Path) -> anyhow::Result<ConcurrencyExperimentSpec> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    // Markdown (README): its fenced YAML blocks, in order.
    let yaml = if path.extension().is_some_and(|e| e == "md") {
        text.split("```yaml")
            .skip(1)
            .filter_map(|block| block.split("```").next())
            .collect::<Vec<_>>()
            .join("\n---\n")
    } else {
        text
    };
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let Ok(value) = serde_yaml::Value::deserialize(doc) else {
            continue;
        };
        if value.get("kind").and_then(|k| k.as_str()) == Some("ConcurrencyExperiment") {
            let spec = value.get("spec").context("no spec")?.clone();
            return Ok(serde_yaml::from_value(spec)?);
        }
    }
    bail!("{}: no ConcurrencyExperiment", path.display())
}

use serde::Deserialize;
