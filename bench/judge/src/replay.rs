//! One experiment replayed over a trace: the manifest's stages and interval cut the trace into
//! analyses, and a judge decides after each one — the operator's per-interval rule (its own
//! `judge_check`, `aggregate` and limits) or the anytime-valid tests.

use concurrency_operator::analysis::sequential::{
    decide, per_test_alpha, rate, Bounds, Buckets, Data,
};
use concurrency_operator::analysis::sequential_bounds;
use concurrency_operator::analysis::{aggregate, judge_check, Unit};
use concurrency_operator::api::{BuiltinMetric, Check, CheckResult, Evidence, Verdict};
use concurrency_operator::plan::{only_waiting, shown_no_worse, shown_worse};

use crate::bootstrap::{Cursor, Draw};
use crate::gate::{refused, CAPACITY};
use crate::manifest::{Judged, Plan};
use crate::trace::{histogram_quantile, Interval, Trace};

use concurrency_operator::analysis::judge::QUEUE_TIME_FLOOR as QUEUE_FLOOR;

/// Which judge decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// The operator today: each check's limits on each interval's values; failed analyses
    /// beyond `failureLimit` (or inconclusive ones beyond `inconclusiveLimit`) roll back.
    PerInterval,
    /// `judge: sequential` as the operator runs it: each check's anytime-valid tests on the
    /// stage's requests so far (`sequential::decide`), `alpha` (the manifest's
    /// `falseRollbackRate`) split over the tests and stages; a regression shown rolls back at
    /// once, waiting for requests counts only past the stage's duration, and a stage shown no
    /// worse ends after a third of it. The other checks (memory) keep the per-interval rule.
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
    /// The stage (0-based) it was in when it rolled back or ran out; the last one otherwise.
    pub stage: usize,
    /// Rolled back for inconclusive analyses rather than a failed check.
    pub inconclusive: bool,
    /// Requests per variant (the smaller) up to the decision or the end.
    pub requests: f64,
    /// The checks that decided it.
    pub why: Vec<String>,
}

impl Outcome {
    fn rolled_back(at: usize, stage: usize, requests: f64, why: Vec<String>) -> Outcome {
        Outcome {
            rolled_back_at: Some(at),
            stage,
            inconclusive: false,
            requests,
            why,
        }
    }

    /// Rolled back for inconclusive analyses beyond `inconclusiveLimit`.
    fn gave_up(at: usize, stage: usize, requests: f64) -> Outcome {
        Outcome {
            inconclusive: true,
            ..Outcome::rolled_back(at, stage, requests, vec!["inconclusive".into()])
        }
    }

    /// Promoted, or the replay ran out in `stage` before the experiment ended.
    fn not_rolled_back(stage: usize, requests: f64) -> Outcome {
        Outcome {
            rolled_back_at: None,
            stage,
            inconclusive: false,
            requests,
            why: Vec::new(),
        }
    }
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
                evidence: None,
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

/// A trace's cumulative counts (`+Inf` last) as the tests read them.
pub fn buckets(bounds: &[f64], cumulative: &[f64]) -> Buckets {
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

/// Replays one experiment over a draw of intervals (baseline, candidate), one per analysis.
pub fn run(plan: &Plan, rule: Rule, trace: &Trace, draw: &Draw) -> Outcome {
    match rule {
        Rule::PerInterval => per_interval_run(plan, trace, draw.cursor()),
        Rule::Sequential { alpha } => sequential_run(plan, alpha, trace, draw.cursor()),
    }
}

fn per_interval_run(plan: &Plan, trace: &Trace, mut draw: Cursor<'_>) -> Outcome {
    let (mut failed, mut inconclusive) = (0, 0);
    let (mut total_b, mut total_c) = (Interval::default(), Interval::default());
    let mut n = 0;
    for (stage, &analyses) in plan.analyses.iter().enumerate() {
        let mut in_stage = Vec::with_capacity(analyses);
        for _ in 0..analyses {
            let Some((b, c)) = draw.next(stage) else {
                break;
            };
            n += 1;
            total_b.add(b);
            total_c.add(c);
            in_stage.push((b, c));
            let requests = total_b.requests.min(total_c.requests);
            let decided = |why: Vec<String>| Outcome::rolled_back(n, stage, requests, why);
            let (verdict, why) = per_interval(plan.checks.iter(), plan.min_requests, trace, b, c);
            match verdict {
                Verdict::Fail => {
                    failed += 1;
                    if failed > plan.failure_limit {
                        return decided(why);
                    }
                }
                Verdict::Inconclusive => {
                    inconclusive += 1;
                    if inconclusive > plan.inconclusive_limit {
                        return Outcome::gave_up(n, stage, requests);
                    }
                }
                Verdict::Pass => {}
            }
        }
        if refused(plan, trace, stage, &in_stage) {
            let requests = total_b.requests.min(total_c.requests);
            return Outcome::rolled_back(n, stage, requests, vec![CAPACITY.into()]);
        }
    }
    let last = plan.analyses.len().saturating_sub(1);
    Outcome::not_rolled_back(last, total_b.requests.min(total_c.requests))
}

/// A sequential check's data over the stage so far, as the operator reads it.
fn stage_data(
    check: &Check,
    trace: &Trace,
    baseline: Option<&Interval>,
    candidate: &Interval,
) -> Data {
    match check.metric {
        Some(BuiltinMetric::ErrorRate) => Data::Errors(rate::Counts {
            baseline_requests: baseline.map_or(0.0, |b| b.requests),
            baseline_errors: baseline.map_or(0.0, |b| b.errors),
            candidate_requests: candidate.requests,
            candidate_errors: candidate.errors,
        }),
        _ => {
            let queue = check.metric == Some(BuiltinMetric::QueueTime);
            let (bounds, b, c) = if queue {
                (
                    &trace.queue_bounds,
                    baseline.map(|b| &b.queue),
                    &candidate.queue,
                )
            } else {
                (
                    &trace.latency_bounds,
                    baseline.map(|b| &b.latency),
                    &candidate.latency,
                )
            };
            Data::Quantile {
                p: quantile_of(check),
                baseline: b.map(|b| buckets(bounds, b)),
                candidate: buckets(bounds, c),
                floor: queue.then_some(QUEUE_FLOOR),
            }
        }
    }
}

fn sequential_run(plan: &Plan, rate: f64, trace: &Trace, mut draw: Cursor<'_>) -> Outcome {
    let tested: Vec<(&Judged, Bounds)> = plan
        .checks
        .iter()
        .filter_map(|j| Some((j, sequential_bounds(&j.check, &j.limits)?)))
        .collect();
    let tests = tested.iter().map(|(_, b)| b.tests()).sum();
    let alpha = per_test_alpha(rate, tests, plan.analyses.len());
    let others: Vec<&Judged> = plan
        .checks
        .iter()
        .filter(|j| sequential_bounds(&j.check, &j.limits).is_none())
        .collect();
    let (mut failed, mut inconclusive) = (0, 0);
    let (mut total_b, mut total_c) = (Interval::default(), Interval::default());
    let mut last_baseline: Option<Interval> = None;
    let mut n = 0;
    for (stage, &duration) in plan.analyses.iter().enumerate() {
        let full = plan.weights.get(stage).is_some_and(|w| *w >= 100);
        let (mut stage_b, mut stage_c) = (Interval::default(), Interval::default());
        let mut in_stage = Vec::new();
        let mut k = 0;
        loop {
            let Some((b, c)) = draw.next(stage) else {
                // The replay ran out before the experiment ended: not a rollback.
                return Outcome::not_rolled_back(stage, total_b.requests.min(total_c.requests));
            };
            n += 1;
            k += 1;
            in_stage.push((b, c));
            for (acc, i) in [(&mut stage_b, b), (&mut total_b, b)] {
                acc.add(i);
            }
            for (acc, i) in [(&mut stage_c, c), (&mut total_c, c)] {
                acc.add(i);
            }
            let requests = total_b.requests.min(total_c.requests);
            let decided = |why: Vec<String>| Outcome::rolled_back(n, stage, requests, why);
            let baseline = if full {
                last_baseline.as_ref()
            } else {
                Some(&stage_b)
            };
            let mut results: Vec<CheckResult> = tested
                .iter()
                .map(|(j, bounds)| {
                    let data = stage_data(&j.check, trace, baseline, &stage_c);
                    let (verdict, reason, evidence) =
                        decide(&data, *bounds, alpha, |v| v.to_string());
                    result(j, verdict, reason, Some(evidence))
                })
                .collect();
            results.extend(others.iter().map(|j| judged(j, trace, b, c)));
            let (verdict, _) = aggregate(
                &results,
                Some(b.requests),
                Some(c.requests),
                plan.min_requests,
            );
            let failing: Vec<String> = results
                .iter()
                .filter(|r| r.verdict == Verdict::Fail)
                .map(|r| r.name.clone())
                .collect();
            match verdict {
                Verdict::Fail if shown_worse(&results) => {
                    let why = results.iter().filter(|r| r.shown_worse());
                    return decided(why.map(|r| r.name.clone()).collect());
                }
                Verdict::Fail => {
                    failed += 1;
                    if failed > plan.failure_limit {
                        return decided(failing);
                    }
                }
                Verdict::Inconclusive => {
                    if !(only_waiting(&results) && k < duration) {
                        inconclusive += 1;
                        if inconclusive > plan.inconclusive_limit {
                            return Outcome::gave_up(n, stage, requests);
                        }
                    }
                }
                Verdict::Pass => {}
            }
            let passed = verdict == Verdict::Pass;
            let early = shown_no_worse(&results) && k >= duration.div_ceil(3).max(1);
            if passed && (k >= duration || early) {
                break;
            }
        }
        if refused(plan, trace, stage, &in_stage) {
            let requests = total_b.requests.min(total_c.requests);
            return Outcome::rolled_back(n, stage, requests, vec![CAPACITY.into()]);
        }
        if !full {
            last_baseline = Some(stage_b);
        }
    }
    let last = plan.analyses.len().saturating_sub(1);
    Outcome::not_rolled_back(last, total_b.requests.min(total_c.requests))
}

/// One check judged per interval by the operator's `judge_check`.
fn judged(j: &Judged, trace: &Trace, b: &Interval, c: &Interval) -> CheckResult {
    let (verdict, reason) = judge_check(
        &j.limits,
        Unit::of(&j.check),
        value(&j.check, trace, b),
        value(&j.check, trace, c),
        None,
    );
    result(j, verdict, reason, None)
}

/// A check's result as the operator records it (no values: the replay needs verdicts).
fn result(j: &Judged, verdict: Verdict, reason: String, evidence: Option<Evidence>) -> CheckResult {
    CheckResult {
        name: j.check.display_name(),
        baseline: None,
        candidate: None,
        limit: j.limits.written.clone(),
        verdict,
        reason: Some(reason),
        evidence,
    }
}
