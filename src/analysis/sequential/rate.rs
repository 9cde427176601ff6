//! Anytime-valid comparison of error rates (after Lindon & Malek, "Anytime-valid inference for
//! multinomial count data", NeurIPS 2022). Given the errors both variants had in an interval,
//! each error is the candidate's with probability `θ = λc·nc / (λc·nc + λb·nb)` (errors per
//! request λ, requests n). The null "the candidate's rate is at most ρ × the baseline's" is
//! `θ ≤ θ₀(ρ)`; against any alternative `θ₁ > θ₀` the likelihood ratio is a supermartingale
//! under every θ of the null, and so is an average over a grid of alternatives — an e-process
//! the operator may look at after every interval. Intervals keep their own traffic split, so
//! a stage change (30 % → 70 %) moves θ₀ and nothing else.

use super::bounds::{boundary, RatioBounds};
use super::mixture::{evidence, BetaBinomialMixture};

/// One interval's requests and errors per variant (`increase()` over the interval).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Counts {
    pub baseline_requests: f64,
    pub baseline_errors: f64,
    pub candidate_requests: f64,
    pub candidate_errors: f64,
}

/// Alternatives, as multiples of the null's ratio: a regression of 25 % is found, slowly; ×2
/// and beyond quickly. The e-value is their average, so each costs `ln 6` of evidence.
const WORSE_BY: [f64; 6] = [1.25, 1.5, 2.0, 3.0, 5.0, 10.0];

use super::quantile::Direction;

/// `ln` of the e-value against the `direction`'s null at rate ratio `ratio`.
pub fn log_evidence(intervals: &[Counts], ratio: f64, direction: Direction) -> f64 {
    if ratio.is_nan() || ratio <= 0.0 {
        return 0.0;
    }
    let alternatives = WORSE_BY.map(|m| match direction {
        Direction::Worse => ratio * m,
        Direction::NoWorse => ratio / m,
    });
    let logs = alternatives.map(|alt| {
        intervals
            .iter()
            .map(|i| log_likelihood_ratio(i, ratio, alt))
            .sum::<f64>()
    });
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return 0.0;
    }
    let sum: f64 = logs.iter().map(|l| (l - max).exp()).sum();
    max + (sum / logs.len() as f64).ln()
}

/// One interval's log likelihood ratio of rate ratio `alt` against `null`.
fn log_likelihood_ratio(i: &Counts, null: f64, alt: f64) -> f64 {
    let (nb, nc) = (i.baseline_requests, i.candidate_requests);
    let (kb, kc) = (i.baseline_errors.max(0.0), i.candidate_errors.max(0.0));
    if nb.is_nan()
        || nc.is_nan()
        || nb <= 0.0
        || nc <= 0.0
        || !kb.is_finite()
        || !kc.is_finite()
        || kb + kc <= 0.0
    {
        return 0.0;
    }
    let theta = |r: f64| r * nc / (r * nc + nb);
    let (t0, t1) = (theta(null), theta(alt));
    kc * (t1 / t0).ln() + kb * ((1.0 - t1) / (1.0 - t0)).ln()
}

/// The confidence sequence for the ratio of error rates candidate / baseline at `alpha`.
pub fn ratio_bounds(intervals: &[Counts], alpha: f64) -> RatioBounds {
    let threshold = (1.0 / alpha).ln();
    RatioBounds {
        lower: boundary(
            |r| log_evidence(intervals, r, Direction::Worse) >= threshold,
            true,
        ),
        upper: boundary(
            |r| log_evidence(intervals, r, Direction::NoWorse) >= threshold,
            false,
        ),
    }
}

/// `ln` of the e-value against "the candidate's error rate is at most `limit`" (errorRate's
/// absolute `max`), from all its requests and errors so far; tuned for `n_opt` requests.
pub fn log_evidence_above(requests: f64, errors: f64, limit: f64, n_opt: f64) -> f64 {
    if !one_sample_usable(requests, errors, limit) {
        return 0.0;
    }
    let v = |n: f64| n * limit * (1.0 - limit);
    let mixture = BetaBinomialMixture::new(v(n_opt.max(1.0)), 0.05, limit, 1.0 - limit, true);
    evidence(mixture.log_super_mg(errors - limit * requests, v(requests)))
}

/// `ln` of the e-value against "the candidate's error rate is above `limit`": its errors are
/// too few for that (shown within errorRate's `max`).
pub fn log_evidence_below(requests: f64, errors: f64, limit: f64, n_opt: f64) -> f64 {
    if !one_sample_usable(requests, errors, limit) {
        return 0.0;
    }
    let v = |n: f64| n * limit * (1.0 - limit);
    let mixture = BetaBinomialMixture::new(v(n_opt.max(1.0)), 0.05, 1.0 - limit, limit, true);
    evidence(mixture.log_super_mg(limit * requests - errors, v(requests)))
}

/// Counts and a limit a one-sample test can use: some requests, finite errors, 0 < limit < 1.
fn one_sample_usable(requests: f64, errors: f64, limit: f64) -> bool {
    requests > 0.0 && errors.is_finite() && limit > 0.0 && limit < 1.0
}
