//! Judging one check from the baseline's and the candidate's value, and one analysis from its
//! checks. Missing or non-finite data is Inconclusive, never Pass.

use crate::api::{
    parse_percent, AnalysisRecord, BuiltinMetric, Check, CheckResult, Limit, QuantityError, Verdict,
};

use super::stats::{allowed_above, MannWhitney};

/// Queue times up to this (seconds) are no queueing: the header's millisecond resolution,
/// clock skew between load balancer and pod, the histogram's 1 ms first bucket. Without it
/// `maxIncrease` would turn a baseline of ~0 into "any candidate value fails", and a missing
/// baseline (no queue-time observations) into Inconclusive for ever.
pub const QUEUE_TIME_FLOOR: f64 = 0.010;

/// How a check's values are shown to people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    /// Seconds of a projection (timeToLimit), shown in Go's duration units: `6.3m`, `24h`.
    Duration,
    Bytes,
    /// Bytes per hour (memoryGrowth; its limits are written as bytes, `50Mi`).
    BytesPerHour,
    /// A 0–1 share, shown as percent.
    Share,
    Plain,
}

impl Unit {
    /// Built-ins have a fixed unit; a custom check takes the unit its limits are written in.
    pub fn of(check: &Check) -> Unit {
        match check.metric {
            Some(BuiltinMetric::Latency | BuiltinMetric::QueueTime) => Unit::Seconds,
            Some(BuiltinMetric::TimeToLimit) => Unit::Duration,
            Some(BuiltinMetric::Memory) => Unit::Bytes,
            Some(BuiltinMetric::MemoryGrowth) => Unit::BytesPerHour,
            Some(
                BuiltinMetric::GvlWait
                | BuiltinMetric::ErrorRate
                | BuiltinMetric::ThreadUtilization
                | BuiltinMetric::Headroom
                | BuiltinMetric::DbPoolWait
                | BuiltinMetric::CpuUtilization
                | BuiltinMetric::EventLoopLag,
            ) => Unit::Share,
            Some(BuiltinMetric::Backlog) => Unit::Plain,
            None => [&check.max, &check.min]
                .into_iter()
                .flatten()
                .find_map(|l| match l {
                    Limit::Text(t) => Some(Self::of_text(t)),
                    Limit::Int(_) => None,
                })
                .unwrap_or(Unit::Plain),
        }
    }

    fn of_text(text: &str) -> Unit {
        let unit = text.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
        match unit {
            "ms" | "s" | "m" | "h" => Unit::Seconds,
            "%" => Unit::Share,
            "Ki" | "Mi" | "Gi" | "Ti" => Unit::Bytes,
            _ => Unit::Plain,
        }
    }

    pub fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return format!("{v}");
        }
        match self {
            Unit::Seconds if v.abs() < 1.0 => format!("{}ms", trim(v * 1000.0, 1)),
            Unit::Duration if v.abs() >= 3600.0 => format!("{}h", trim(v / 3600.0, 1)),
            Unit::Duration if v.abs() >= 60.0 => format!("{}m", trim(v / 60.0, 1)),
            Unit::Duration => format!("{}s", trim(v, 0)),
            Unit::Seconds => format!("{}s", trim(v, 3)),
            Unit::Bytes if v.abs() >= 1024f64.powi(3) => {
                format!("{}Gi", trim(v / 1024f64.powi(3), 2))
            }
            Unit::Bytes => format!("{}Mi", trim(v / 1024f64.powi(2), 1)),
            Unit::BytesPerHour => format!("{}/h", Unit::Bytes.format(v)),
            Unit::Share => format!("{}%", trim(v * 100.0, 2)),
            Unit::Plain => trim(v, 4),
        }
    }
}

/// `v` with at most `decimals` decimals and no trailing zeros.
fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A check's limits in base units, and as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Share, e.g. 0.10 for `10%`.
    pub max_increase: Option<f64>,
    /// Values up to this are noise for `maxIncrease` (queue time): a baseline below it is
    /// compared as if it were the floor, and a missing or NaN baseline counts as 0 (nothing
    /// queued), so the candidate is judged against floor × (1 + maxIncrease).
    pub floor: Option<f64>,
    /// `max 500ms, maxIncrease 10%`.
    pub written: String,
}

impl Limits {
    pub fn from_check(check: &Check) -> Result<Limits, QuantityError> {
        let name = check.display_name();
        let field = |f: &str| format!("spec.analysis.checks[{name}].{f}");
        let min = check
            .min
            .as_ref()
            .map(|l| l.value(&field("min")))
            .transpose()?;
        let max = check
            .max
            .as_ref()
            .map(|l| l.value(&field("max")))
            .transpose()?;
        let max_increase = check
            .max_increase
            .as_deref()
            .map(|p| parse_percent(&field("maxIncrease"), p))
            .transpose()?;
        let mut parts = Vec::new();
        if let Some(l) = &check.min {
            parts.push(format!("min {l}"));
        }
        if let Some(l) = &check.max {
            parts.push(format!("max {l}"));
        }
        if let Some(p) = &check.max_increase {
            parts.push(format!("maxIncrease {p}"));
        }
        let floor = (check.metric == Some(BuiltinMetric::QueueTime)).then_some(QUEUE_TIME_FLOOR);
        Ok(Limits {
            min,
            max,
            max_increase,
            floor,
            written: parts.join(", "),
        })
    }

    /// The highest candidate value `maxIncrease` allows. Scaling by |baseline| keeps the rule
    /// "at most x% worse" for zero and negative baselines: a zero baseline tolerates no
    /// increase at all (x% of nothing is nothing).
    pub fn allowed_above(baseline: f64, share: f64) -> f64 {
        allowed_above(baseline, share)
    }
}

fn pct(share: f64) -> String {
    format!("{}%", trim(share * 100.0, 1))
}

/// Judges the candidate. Absolute limits and `maxIncrease` hold per interval; `statistical`
/// (enough past samples) adds the Mann-Whitney test of `maxIncrease` over the intervals, which
/// can fail a candidate that passes this interval but never pass one that fails it.
pub fn judge_check(
    limits: &Limits,
    unit: Unit,
    baseline: Option<f64>,
    candidate: Option<f64>,
    statistical: Option<&MannWhitney>,
) -> (Verdict, String) {
    let f = |v: f64| unit.format(v);
    let base_text = match baseline {
        Some(b) => format!("baseline {}", f(b)),
        None => "no baseline value".to_string(),
    };
    let Some(c) = candidate else {
        return (
            Verdict::Inconclusive,
            format!("no value for the candidate ({base_text})"),
        );
    };
    if !c.is_finite() {
        return (
            Verdict::Inconclusive,
            format!("the candidate's value is {c} (no traffic in the interval?); {base_text}"),
        );
    }
    let cand = f(c);
    if let Some(max) = limits.max.filter(|m| c > *m) {
        return (
            Verdict::Fail,
            format!("candidate {cand} is above max {} ({base_text})", f(max)),
        );
    }
    if let Some(min) = limits.min.filter(|m| c < *m) {
        return (
            Verdict::Fail,
            format!("candidate {cand} is below min {} ({base_text})", f(min)),
        );
    }
    let Some(share) = limits.max_increase else {
        return (
            Verdict::Pass,
            format!(
                "candidate {cand} is within {} ({base_text})",
                limits.written
            ),
        );
    };
    let b = match (baseline, limits.floor) {
        (Some(b), _) if b.is_finite() => b,
        // Queue time: the baseline had requests (minRequests) but nothing was observed
        // queueing; the candidate, which has a value, is judged against the floor.
        (_, Some(_)) => 0.0,
        (Some(b), None) => {
            return (
                Verdict::Inconclusive,
                format!("candidate {cand}, but the baseline's value is {b}: nothing to compare maxIncrease {} with", pct(share)),
            )
        }
        (None, None) => {
            return (
                Verdict::Inconclusive,
                format!("candidate {cand}, but no baseline value to compare maxIncrease {} with", pct(share)),
            )
        }
    };
    let base_value = match baseline {
        Some(v) if v.is_finite() => f(b),
        _ => "none (counted as 0)".to_string(),
    };
    // Below the floor both sides are noise: compare with the floor instead.
    let floored = limits.floor.filter(|fl| b < *fl);
    let change = if b != 0.0 {
        // Rounded first, so float noise shows as "+0%" rather than "-0%".
        let rel = ((c - b) / b.abs() * 1000.0).round() / 10.0;
        format!(
            "{}{}%",
            if rel < 0.0 { "-" } else { "+" },
            trim(rel.abs(), 1)
        )
    } else {
        "from 0".into()
    };
    let (reference, floor_note) = match floored {
        Some(fl) => (
            fl,
            format!(", below the floor {} so compared with it", f(fl)),
        ),
        None => (b, String::new()),
    };
    let allowed = Limits::allowed_above(reference, share);
    // The interval's own comparison always holds: one very bad interval fails whatever the
    // statistics say about the others.
    if c > allowed {
        return (
            Verdict::Fail,
            format!(
                "candidate {cand} is more than maxIncrease {} above baseline {base_value} ({change}{floor_note}; allowed up to {})",
                pct(share),
                f(allowed)
            ),
        );
    }
    let within = format!(
        "candidate {cand} vs baseline {base_value} ({change}{floor_note}) is within {}",
        limits.written
    );
    // The test adds what one interval cannot show: a candidate consistently above the
    // tolerated baseline. Below the queue-time floor both sides are noise: not tested.
    match statistical.filter(|_| floored.is_none()) {
        Some(mw) => {
            let (verdict, joint, above) = if mw.significant {
                (Verdict::Fail, "but", "significantly above")
            } else {
                (Verdict::Pass, "and", "not significantly above")
            };
            (
                verdict,
                format!(
                    "{within}, {joint} over {} intervals the candidate is {above} baseline + {} (Mann-Whitney p = {:.4}, alpha {})",
                    mw.n_candidate,
                    pct(share),
                    mw.p_value,
                    mw.alpha
                ),
            )
        }
        None => (Verdict::Pass, within),
    }
}

/// Adds the entry of a rule judged beside the checks (restarts, the worker count) to an
/// analysis already aggregated: a Fail fails the whole analysis, even with too few requests (a
/// killed candidate serves few); an Inconclusive makes a passing analysis Inconclusive only
/// when the rule is `binding` (a rule that only records must never hold an experiment up).
pub fn attach_rule(record: &mut AnalysisRecord, check: CheckResult, binding: bool) {
    let (verdict, name) = (check.verdict, check.name.clone());
    record.checks.push(check);
    match verdict {
        Verdict::Fail => {
            let names: Vec<&str> = record
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| c.name.as_str())
                .collect();
            record.reason = Some(format!("failed: {}", names.join(", ")));
            record.verdict = Verdict::Fail;
        }
        Verdict::Inconclusive if binding && record.verdict == Verdict::Pass => {
            record.verdict = Verdict::Inconclusive;
            record.reason = Some(format!("inconclusive: {name}"));
        }
        _ => {}
    }
}

/// The analysis verdict. Too few requests for either variant make it Inconclusive whatever
/// the checks say (their values are noise); then any Fail fails, any Inconclusive is
/// Inconclusive, and only all-Pass passes.
pub fn aggregate(
    checks: &[CheckResult],
    baseline_requests: Option<f64>,
    candidate_requests: Option<f64>,
    min_requests: i64,
) -> (Verdict, String) {
    let count = |r: Option<f64>| match r {
        Some(v) if v.is_finite() => trim(v, 0),
        _ => "no data".into(),
    };
    // A sequential test that shows a regression decides on the whole stage, not this
    // interval: a thin interval does not hide it.
    let shown_worse: Vec<&str> = checks
        .iter()
        .filter(|c| c.shown_worse())
        .map(|c| c.name.as_str())
        .collect();
    if !shown_worse.is_empty() {
        return (Verdict::Fail, format!("failed: {}", shown_worse.join(", ")));
    }
    let enough = |r: Option<f64>| r.is_some_and(|v| v.is_finite() && v >= min_requests as f64);
    if !enough(baseline_requests) || !enough(candidate_requests) {
        return (
            Verdict::Inconclusive,
            format!(
                "too few requests in the interval: baseline {}, candidate {} (minRequests {min_requests})",
                count(baseline_requests),
                count(candidate_requests)
            ),
        );
    }
    let named = |v: Verdict| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.verdict == v)
            .map(|c| c.name.as_str())
            .collect()
    };
    let failed = named(Verdict::Fail);
    if !failed.is_empty() {
        return (Verdict::Fail, format!("failed: {}", failed.join(", ")));
    }
    let open = named(Verdict::Inconclusive);
    if !open.is_empty() {
        return (
            Verdict::Inconclusive,
            format!("inconclusive: {}", open.join(", ")),
        );
    }
    if checks.is_empty() {
        return (Verdict::Inconclusive, "no checks were evaluated".into());
    }
    (
        Verdict::Pass,
        format!(
            "all {} checks passed (requests: baseline {}, candidate {})",
            checks.len(),
            count(baseline_requests),
            count(candidate_requests)
        ),
    )
}
