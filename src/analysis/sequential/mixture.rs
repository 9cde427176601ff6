//! The beta-binomial mixture supermartingale (Howard, Ramdas, McAuliffe, Sekhon, "Time-uniform,
//! nonparametric, nonasymptotic confidence sequences", 2021, Prop. 7), as the `confseq` library
//! computes it (MIT): for observations whose centred values lie in `[-g, h]`, `s` their sum and
//! `v = g·h·n` their variance process, `exp(log_super_mg(s, v))` is a nonnegative supermartingale
//! under the null. By Ville's inequality it exceeds `1/α` at *any* time with probability at most
//! `α` — the operator may look after every interval without inflating its error rate.
//!
//! One-sided mixtures (`one_sided`) put all prior mass on positive deviations: they stay
//! supermartingales when the true mean is *below* the null's, which is what a one-sided null
//! ("no worse than the baseline") needs.

use statrs::function::gamma::ln_gamma;

/// The log of the mixture supermartingale for one null and one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BetaBinomialMixture {
    r: f64,
    g: f64,
    h: f64,
    one_sided: bool,
    normalizer: f64,
}

impl BetaBinomialMixture {
    /// `v_opt`: the variance process at which the boundary is tightest (`p(1−p)·n` for the
    /// number of requests `n` at which a decision is most wanted); `alpha_opt`: the level it
    /// is tuned for. `g`, `h` > 0.
    pub fn new(v_opt: f64, alpha_opt: f64, g: f64, h: f64, one_sided: bool) -> Self {
        let rho = if one_sided {
            best_rho(v_opt, 2.0 * alpha_opt)
        } else {
            best_rho(v_opt, alpha_opt)
        };
        let r = (rho - g * h).max(1e-3 * g * h);
        let x = if one_sided { h / (g + h) } else { 1.0 };
        let normalizer = log_incomplete_beta(r / (g * (g + h)), r / (h * (g + h)), x);
        BetaBinomialMixture {
            r,
            g,
            h,
            one_sided,
            normalizer,
        }
    }

    /// `ln M(s, v)`. Convex in `s` (the log of a mixture of exponentials of `s`).
    pub fn log_super_mg(&self, s: f64, v: f64) -> f64 {
        let (g, h, r) = (self.g, self.h, self.r);
        let x = if self.one_sided { h / (g + h) } else { 1.0 };
        v / (g * h) * (g + h).ln()
            - ((v + h * s) / (h * (g + h))) * g.ln()
            - ((v - g * s) / (g * (g + h))) * h.ln()
            + log_incomplete_beta(
                (r + v - g * s) / (g * (g + h)),
                (r + v + h * s) / (h * (g + h)),
                x,
            )
            - self.normalizer
    }

    /// The smallest `s` at which `ln M(s, v)` reaches `ln(1/α)` (the uniform boundary), or
    /// `v/g` — the largest `s` possible — when even that does not reach it.
    pub fn bound(&self, v: f64, alpha: f64) -> f64 {
        let threshold = (1.0 / alpha).ln();
        let upper = v / self.g;
        if self.log_super_mg(upper, v) < threshold {
            return upper;
        }
        let (mut lo, mut hi) = (0.0, upper);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if self.log_super_mg(mid, v) < threshold {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-12 * upper.max(1.0) {
                break;
            }
        }
        (lo + hi) / 2.0
    }
}

/// An e-value's log as a verdict reads it: NaN (degenerate counts) is no evidence.
pub fn evidence(log_e: f64) -> f64 {
    if log_e.is_nan() {
        0.0
    } else {
        log_e
    }
}

/// The normal mixture's precision for a tight boundary at `v` (confseq's `best_rho`).
fn best_rho(v: f64, alpha: f64) -> f64 {
    let l = (1.0 / alpha).ln();
    v / (2.0 * l + (1.0 + 2.0 * l).ln())
}

/// `ln B(a, b)`.
pub fn ln_beta(a: f64, b: f64) -> f64 {
    ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b)
}

/// `ln ∫₀ˣ t^(a−1) (1−t)^(b−1) dt`, in log space throughout: with `a` and `b` in the thousands
/// (thousands of requests) the integral itself underflows.
pub fn log_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x >= 1.0 {
        return ln_beta(a, b);
    }
    if x <= 0.0 {
        return f64::NEG_INFINITY;
    }
    // x^a (1−x)^b / a × the continued fraction is B(a, b)·I_x(a, b) itself.
    let partial = |a: f64, b: f64, x: f64| {
        a * x.ln() + b * (-x).ln_1p() + continued_fraction(a, b, x).ln() - a.ln()
    };
    if x < (a + 1.0) / (a + b + 2.0) {
        partial(a, b, x)
    } else {
        // B·I_x(a, b) = B − B·I_{1−x}(b, a), where the fraction converges.
        let whole = ln_beta(a, b);
        whole + ln_1m_exp(partial(b, a, 1.0 - x) - whole)
    }
}

/// `ln(1 − eᵘ)` for `u ≤ 0`, accurate at both ends.
fn ln_1m_exp(u: f64) -> f64 {
    if u >= 0.0 {
        f64::NEG_INFINITY
    } else if u > -std::f64::consts::LN_2 {
        (-u.exp_m1()).ln()
    } else {
        (-u.exp()).ln_1p()
    }
}

/// The incomplete beta's continued fraction by the modified Lentz method. It converges in
/// O(√max(a, b)) terms near the mean, hence the generous cap.
fn continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let nonzero = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / nonzero(1.0 - qab * x / qap);
    let mut f = d;
    // One Lentz step for the fraction's next coefficient `aa`: the factor `f` grows by.
    let mut step = |aa: f64| {
        d = 1.0 / nonzero(1.0 + aa * d);
        c = nonzero(1.0 + aa / c);
        d * c
    };
    for m in 1..100_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        f *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        let delta = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        f *= delta;
        if (delta - 1.0).abs() < EPS {
            break;
        }
    }
    f
}
