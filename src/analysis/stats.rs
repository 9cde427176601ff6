//! Statistical comparison of per-interval samples: a one-sided Mann-Whitney U test (as Kayenta
//! does), so one lucky interval cannot hide a real regression and one noisy interval is not
//! mistaken for one.
//!
//! Samples are the check's per-interval values from the experiment's past analyses plus the
//! current one. Only `maxIncrease` is judged statistically: the baseline samples are raised by
//! the tolerated increase, and the test asks whether the candidate is stochastically greater
//! than that tolerated baseline.

use statrs::function::erf::erfc;

use crate::api::{AnalysisRecord, Statistical};

/// Below this many values per variant (and without ties) the exact distribution is used.
const EXACT_MAX: usize = 25;

#[derive(Debug, Clone, PartialEq)]
pub struct MannWhitney {
    /// U of the candidate: pairs (candidate, baseline) where the candidate is larger, ties ½.
    pub u: f64,
    /// P(U ≥ u) under "no difference".
    pub p_value: f64,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub alpha: f64,
    pub significant: bool,
    /// Exact distribution (small samples without ties) rather than the normal approximation.
    pub exact: bool,
}

/// One-sided test of "candidate tends to be greater than baseline". Returns (U, p, exact);
/// `None` if either sample is empty or holds a non-finite value.
pub fn mann_whitney_greater(baseline: &[f64], candidate: &[f64]) -> Option<(f64, f64, bool)> {
    let (n_b, n_c) = (baseline.len(), candidate.len());
    if n_b == 0 || n_c == 0 || baseline.iter().chain(candidate).any(|v| !v.is_finite()) {
        return None;
    }
    // Midranks over the pooled sample; `true` marks the candidate.
    let mut pooled: Vec<(f64, bool)> = baseline
        .iter()
        .map(|&v| (v, false))
        .chain(candidate.iter().map(|&v| (v, true)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = pooled.len();
    let mut rank_sum_c = 0.0;
    let mut tie_term = 0.0; // Σ (t³ − t) over tie groups
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let midrank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_c += midrank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let (m, k) = (n_c as f64, n_b as f64);
    let u = rank_sum_c - m * (m + 1.0) / 2.0;
    if tie_term == 0.0 && n_b <= EXACT_MAX && n_c <= EXACT_MAX {
        return Some((u, exact_upper_tail(n_c, n_b, u.round() as usize), true));
    }
    let nf = n as f64;
    let variance = m * k / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if variance <= 0.0 {
        // Every value equal: no evidence either way.
        return Some((u, 1.0, false));
    }
    // Continuity correction towards the mean.
    let z = (u - m * k / 2.0 - 0.5) / variance.sqrt();
    Some((u, upper_normal_tail(z), false))
}

/// P(Z ≥ z) for a standard normal Z.
pub fn upper_normal_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// P(U ≥ u) for sample sizes m (candidate) and n (baseline) without ties, by counting
/// arrangements: the largest value is either a candidate (beating all n baselines) or not.
pub(super) fn exact_upper_tail(m: usize, n: usize, u: usize) -> f64 {
    // counts[a][b][x]: arrangements of a candidates and b baselines with U = x.
    let mut counts: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n + 1]; m + 1];
    for a in 0..=m {
        for b in 0..=n {
            let mut row = vec![0.0; a * b + 1];
            if a == 0 || b == 0 {
                row[0] = 1.0;
            } else {
                for (x, slot) in row.iter_mut().enumerate() {
                    let top_candidate = if x >= b {
                        counts[a - 1][b].get(x - b).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    };
                    let top_baseline = counts[a][b - 1].get(x).copied().unwrap_or(0.0);
                    *slot = top_candidate + top_baseline;
                }
            }
            counts[a][b] = row;
        }
    }
    let all = &counts[m][n];
    let total: f64 = all.iter().sum();
    all.iter().skip(u).sum::<f64>() / total
}

/// The highest candidate value `maxIncrease` allows. Scaling by |baseline| keeps the rule
/// "at most x% worse" for zero and negative baselines: a zero baseline tolerates no increase at
/// all (x% of nothing is nothing). Here, below judgement, because the statistical test shifts
/// the baseline samples by it too.
pub fn allowed_above(baseline: f64, share: f64) -> f64 {
    baseline + baseline.abs() * share
}

/// The per-interval (baseline, candidate) values of check `name`: every past analysis where
/// both variants served at least `min_requests` and both values are finite, then the current.
pub fn samples(
    name: &str,
    history: &[AnalysisRecord],
    min_requests: i64,
    current: (Option<f64>, Option<f64>),
) -> (Vec<f64>, Vec<f64>) {
    let enough = |r: Option<f64>| r.is_some_and(|v| v >= min_requests as f64);
    let past = history
        .iter()
        .filter(|r| enough(r.baseline_requests) && enough(r.candidate_requests))
        .filter_map(|r| r.checks.iter().find(|c| c.name == name))
        .map(|c| (c.baseline, c.candidate));
    past.chain(std::iter::once(current))
        .filter_map(|pair| match pair {
            (Some(b), Some(c)) if b.is_finite() && c.is_finite() => Some((b, c)),
            _ => None,
        })
        .unzip()
}

/// The statistical judgement of `maxIncrease` (`share`), or `None` while fewer than
/// `minSamples` intervals are available.
pub fn compare(
    spec: &Statistical,
    share: f64,
    baseline: &[f64],
    candidate: &[f64],
) -> Option<MannWhitney> {
    let min = usize::try_from(spec.min_samples).unwrap_or(usize::MAX);
    if baseline.len() < min || candidate.len() < min {
        return None;
    }
    let tolerated: Vec<f64> = baseline.iter().map(|&b| allowed_above(b, share)).collect();
    let (u, p_value, exact) = mann_whitney_greater(&tolerated, candidate)?;
    Some(MannWhitney {
        u,
        p_value,
        n_baseline: baseline.len(),
        n_candidate: candidate.len(),
        alpha: spec.alpha,
        significant: p_value < spec.alpha,
        exact,
    })
}
