//! Whether an experiment's stages can reach the data its checks need, at a given request rate
//! (issue 30: minimum data, said plainly). Pure: `kubectl concurrency init` asks it with the
//! target's measured rate, before anything is applied.
//!
//! - Every judge: an analysis with fewer than `minRequests` per variant in its interval is
//!   Inconclusive (too few requests).
//! - `judge: perInterval`: a quantile per interval rests on the requests above it; with fewer
//!   than `TAIL` of them (p99: 1,000 requests per interval) one slow request moves it, so a
//!   `maxIncrease` on it rolls back by chance.
//! - `judge: sequential`: a quantile shows nothing before the test's minimum requests per
//!   variant in the stage (`QuantileTest::minimum_requests` at the level each test gets), so a
//!   stage that cannot reach them ends Inconclusive.

use std::time::Duration;

use crate::api::{parse_duration, Analysis, BuiltinMetric, JudgeMode, Stage};

use super::anytime::{sequential_bounds, test_alpha};
use super::judge::Limits;
use super::queries::quantile_of;
use super::sequential::{Direction, QuantileTest, N_OPT};

/// Requests above a quantile for one interval's value of it to rest on more than a few
/// requests (per-interval judge).
pub const TAIL: f64 = 10.0;

/// The stages and analysis of an experiment, read for `notes`.
pub struct Plan<'a> {
    pub analysis: &'a Analysis,
    pub stages: &'a [Stage],
}

/// One sentence per way the stages fall short at `rate` requests per second (over all the
/// target's pods); empty when they do not. Fields that do not parse are left to validation.
pub fn notes(plan: &Plan, rate: f64) -> Vec<String> {
    let a = plan.analysis;
    let Ok(interval) = parse_duration("spec.analysis.interval", &a.interval) else {
        return Vec::new();
    };
    if !(rate.is_finite() && rate >= 0.0) {
        return Vec::new();
    }
    let stages: Vec<(i32, Duration)> = plan
        .stages
        .iter()
        .filter_map(|s| {
            Some((
                s.weight,
                parse_duration("spec.stages[].duration", &s.duration).ok()?,
            ))
        })
        .collect();
    let Some(&(first, _)) = stages.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Per variant: the smaller share, except at 100 % (no baseline serves; the candidate's).
    let per_variant = |weight: i32, over: Duration| {
        let share = f64::from(weight.clamp(0, 100)) / 100.0;
        let share = if weight >= 100 {
            share
        } else {
            share.min(1.0 - share)
        };
        rate * share * over.as_secs_f64()
    };
    let at = format!("{} req/s", trim(rate));
    // Requests per variant in one interval of stage 1: what each per-interval rule is held to.
    let first_interval = per_variant(first, interval);
    if first_interval < a.min_requests as f64 {
        out.push(format!(
            "At the target's {at}, stage 1 ({first}%) brings about {} requests per variant per \
             {} interval, fewer than minRequests {}: its analyses would be Inconclusive. \
             Lengthen spec.analysis.interval or lower minRequests.",
            first_interval.round(),
            a.interval,
            a.min_requests
        ));
    }
    let alpha = test_alpha(a, plan.stages.len()).ok().flatten();
    for check in &a.checks {
        let Some(metric @ (BuiltinMetric::Latency | BuiltinMetric::QueueTime)) = check.metric
        else {
            continue;
        };
        if check.query.is_some() {
            continue;
        }
        let Ok(q) = quantile_of(metric, check.quantile) else {
            continue;
        };
        let name = check.display_name();
        let p = format!("p{}", trim(q * 100.0));
        match (a.judge, alpha) {
            (JudgeMode::Sequential, Some(alpha)) => {
                let tested = Limits::from_check(check)
                    .ok()
                    .and_then(|l| sequential_bounds(check, &l))
                    .is_some();
                if !tested {
                    continue;
                }
                let needed = QuantileTest::new(q, N_OPT).minimum_requests(alpha, Direction::Worse);
                let short: Vec<String> = stages
                    .iter()
                    .enumerate()
                    .filter(|(_, (w, d))| per_variant(*w, *d) < needed)
                    .map(|(i, (w, d))| {
                        format!("stage {} ({w}%: ~{})", i + 1, per_variant(*w, *d).round())
                    })
                    .collect();
                if !short.is_empty() {
                    out.push(format!(
                        "Check {name}: its {p} shows nothing before {} requests per variant in \
                         a stage; at {at} {} would end without a decision on it \
                         (Inconclusive). Lengthen those stages, or judge a lower quantile.",
                        needed.ceil(),
                        short.join(", ")
                    ));
                }
            }
            _ => {
                let needed = (TAIL / (1.0 - q)).ceil();
                if first_interval < needed && check.max_increase.is_some() {
                    out.push(format!(
                        "Check {name}: a {p} per interval rests on the requests above it; at \
                         {at} stage 1 brings about {} per variant per {} interval, so one slow \
                         request moves it ({needed} would put {} above it). Lengthen the \
                         interval, judge a lower quantile, or use judge: sequential.",
                        first_interval.round(),
                        a.interval,
                        TAIL
                    ));
                }
            }
        }
    }
    out
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
