//! "Better enough" (`minImprovement`): seed 004 moved to Falcon only when its P95 beat Puma's by
//! more than 30 %. Checks say "no worse than the baseline"; this says "this much better", and
//! is asked once, when every stage has passed, of the whole experiment's intervals — the same
//! per-interval (baseline, candidate) pairs and statistics `maxIncrease` is judged with.
//!
//! Lower is better for every check it applies to (latency, queue time, memory, waits, error
//! and utilisation shares; `headroom` is refused by the API server). An interval's improvement
//! is `1 − candidate / baseline`; only intervals with a positive baseline count (nothing is
//! 30 % below zero).

use crate::api::{parse_percent, Analysis, AnalysisRecord, QuantityError, Statistical};

use super::judge::Unit;
use super::stats::{mann_whitney_greater, samples};

/// One check's requirement and what the experiment measured against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Improvement {
    pub check: String,
    /// Required share, e.g. 0.30.
    pub required: f64,
    /// Median of the intervals' improvements; `None` without an interval to compare.
    pub measured: Option<f64>,
    pub met: bool,
    /// One sentence for the decision and the Event.
    pub detail: String,
}

/// Every check with `minImprovement`, judged over `history` (the analyses kept in status).
pub fn judge(
    spec: &Analysis,
    history: &[AnalysisRecord],
) -> Result<Vec<Improvement>, QuantityError> {
    let mut out = Vec::new();
    for check in &spec.checks {
        let Some(text) = check.min_improvement.as_deref() else {
            continue;
        };
        let name = check.display_name();
        let required = parse_percent(
            &format!("spec.analysis.checks[{name}].minImprovement"),
            text,
        )?;
        let (baseline, candidate) = samples(&name, history, spec.min_requests, (None, None));
        out.push(judge_one(
            &name,
            required,
            Unit::of(check),
            &baseline,
            &candidate,
            spec.statistical.as_ref(),
        ));
    }
    Ok(out)
}

fn pct(share: f64) -> String {
    let v = (share * 1000.0).round() / 10.0;
    format!("{v}%")
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Met when the median interval improved by `required` — or, with `statistical` and at least
/// `minSamples` intervals, when the candidate is significantly below the baseline lowered by
/// `required` (the mirror of `maxIncrease`'s test: one-sided Mann-Whitney).
pub fn judge_one(
    name: &str,
    required: f64,
    unit: Unit,
    baseline: &[f64],
    candidate: &[f64],
    statistical: Option<&Statistical>,
) -> Improvement {
    let pairs: Vec<(f64, f64)> = baseline
        .iter()
        .zip(candidate)
        .filter(|(b, c)| **b > 0.0 && b.is_finite() && c.is_finite())
        .map(|(b, c)| (*b, *c))
        .collect();
    let measured = median(pairs.iter().map(|(b, c)| 1.0 - c / b).collect());
    let Some(m) = measured else {
        return Improvement {
            check: name.to_string(),
            required,
            measured: None,
            met: false,
            detail: format!(
                "{name}: no interval where both variants had a value above 0 to measure \
                 minImprovement {} against",
                pct(required)
            ),
        };
    };
    let (bs, cs): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let typical = |v: &[f64]| {
        median(v.to_vec())
            .map(|x| unit.format(x))
            .unwrap_or_default()
    };
    let shown = format!(
        "{name}: candidate {} vs baseline {} (medians of {} intervals), {} {}",
        typical(&cs),
        typical(&bs),
        pairs.len(),
        if m >= 0.0 { "better by" } else { "worse by" },
        pct(m.abs())
    );
    let min_samples = statistical
        .map(|s| usize::try_from(s.min_samples).unwrap_or(usize::MAX))
        .unwrap_or(usize::MAX);
    let (met, how) = match statistical.filter(|_| pairs.len() >= min_samples) {
        Some(s) => {
            // "The lowered baseline tends to be greater than the candidate".
            let lowered: Vec<f64> = bs.iter().map(|b| b * (1.0 - required)).collect();
            match mann_whitney_greater(&cs, &lowered) {
                Some((_, p, _)) => (
                    p < s.alpha,
                    format!(
                        "{} more than {} (Mann-Whitney p = {p:.4}, alpha {})",
                        if p < s.alpha {
                            "significantly"
                        } else {
                            "not significantly"
                        },
                        pct(required),
                        s.alpha
                    ),
                ),
                None => (false, "the test had no samples".to_string()),
            }
        }
        None => (
            m >= required,
            format!(
                "{} the required {}",
                if m >= required {
                    "at least"
                } else {
                    "less than"
                },
                pct(required)
            ),
        ),
    };
    Improvement {
        check: name.to_string(),
        required,
        measured: Some(m),
        met,
        detail: format!("{shown}: {how}"),
    }
}
