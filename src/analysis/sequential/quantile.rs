//! Anytime-valid comparison of one quantile between baseline and candidate, from the cumulative
//! bucket counts of a Prometheus histogram (Howard & Ramdas, "Sequential estimation of quantiles
//! with applications to A/B-testing and best-arm identification", Bernoulli 2022, §4; the
//! `confseq` library's `QuantileABTest`, generalised to a one-sided null with a tolerance and to
//! counts known only at bucket boundaries).
//!
//! The null "the candidate's p-quantile is at most ρ × the baseline's" is rejected when, for
//! *every* x, the candidate's requests at or below x are too few for `Q_c(p) ≤ x` or the
//! baseline's below x/ρ too many for `Q_b(p) ≥ x/ρ`. At the true `x = Q_c(p)` both are
//! one-sided mixture supermartingales (the arms are independent, so their product is one too),
//! hence the infimum over x exceeds `ln(1/α)` with probability at most α, however often it is
//! looked at. Between bucket boundaries only a range of counts is known; each side takes the
//! end of the range that is least evidence, so buckets cost power, never validity.

use super::bounds::{boundary, RatioBounds};
use super::mixture::{evidence, BetaBinomialMixture};

/// A histogram as Prometheus keeps it: ascending finite bucket bounds (`le`), the observations
/// at or below each, and all observations (the `+Inf` bucket). Counts may be fractional
/// (`increase()` extrapolates).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buckets {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<f64>,
    pub total: f64,
}

impl Buckets {
    /// Values up to `floor` counted as the floor: "no queueing" (queue times under the
    /// header's resolution) compares as the floor, as the per-interval rule does. Buckets
    /// below it go; a bound just under it with no requests keeps the interpolation from
    /// reading any below it.
    pub fn floored(&self, floor: f64) -> Buckets {
        let keep = self.bounds.partition_point(|le| *le < floor);
        let mut bounds = vec![floor * (1.0 - 1e-9)];
        let mut cumulative = vec![0.0];
        bounds.extend_from_slice(&self.bounds[keep..]);
        cumulative.extend_from_slice(&self.cumulative[keep..]);
        if !bounds[1..].iter().any(|le| *le >= floor) {
            // No bound at or above the floor: everything is at most the floor.
            bounds.push(floor);
            cumulative.push(self.total);
        }
        Buckets {
            bounds,
            cumulative,
            total: self.total,
        }
    }

    /// From `(le, cumulative count)` pairs in any order, `+Inf` among them. Counts that fall
    /// as `le` rises (a counter reset inside the window, extrapolation) are raised to the
    /// running maximum, as Prometheus's `histogram_quantile` does.
    pub fn from_pairs(mut pairs: Vec<(f64, f64)>) -> Buckets {
        pairs.retain(|(le, c)| !le.is_nan() && c.is_finite());
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut b = Buckets::default();
        let mut running: f64 = 0.0;
        for (le, c) in pairs {
            running = running.max(c.max(0.0));
            if le.is_infinite() {
                b.total = running;
            } else {
                b.bounds.push(le);
                b.cumulative.push(running);
            }
        }
        b.total = b.total.max(running);
        b
    }

    /// Observations at or below any x in cell `j` — x in `(bounds[j−1], bounds[j]]`, the last
    /// cell beyond every bound — lie in the returned range.
    fn cell_range(&self, j: usize) -> (f64, f64) {
        let below = if j == 0 { 0.0 } else { self.cumulative[j - 1] };
        let at = self.cumulative.get(j).copied().unwrap_or(self.total);
        (below, at)
    }
}

/// Observations at or below `x` on an arm whose bucket bounds are `bounds` (its own, or scaled
/// by the ratio): a range in the exact reading, the linear interpolation of `histogram_quantile`
/// otherwise. Beyond the last finite bound nothing is known but the range up to the total.
pub fn count_at(b: &Buckets, bounds: &[f64], x: f64, exact: bool) -> (f64, f64) {
    let j = bounds.partition_point(|bound| *bound < x);
    if exact || j >= bounds.len() {
        return b.cell_range(j);
    }
    let (lower, below) = if j == 0 {
        (bounds[0].min(0.0), 0.0)
    } else {
        (bounds[j - 1], b.cumulative[j - 1])
    };
    let (upper, at) = (bounds[j], b.cumulative[j]);
    let share = if upper > lower {
        ((x - lower) / (upper - lower)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let n = below + (at - below) * share;
    (n, n)
}

/// How counts between bucket bounds are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Only the range the buckets allow: valid for the quantile of the raw latencies, but a
    /// regression smaller than the buckets' spacing (×2–2.5 in yabeda's and
    /// prometheus_exporter's defaults) can never be shown.
    Exact,
    /// Linear within each bucket, as `histogram_quantile` reads it: the test is then about the
    /// quantile the dashboards and the per-interval checks show. Still anytime-valid for it:
    /// an interpolated count is a sum of per-request values in [0, 1] whose mean is the
    /// interpolated CDF, and the beta-binomial mixture holds for any such values.
    Interpolated,
}

/// Which null is tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Null "no worse than ρ": rejecting it shows the candidate's quantile is above ρ × the
    /// baseline's (a regression beyond the tolerance).
    Worse,
    /// Null "worse than ρ": rejecting it shows the candidate's quantile is at most ρ × the
    /// baseline's (no regression beyond the tolerance).
    NoWorse,
}

/// One arm's evidence as a function of its count at or below x.
struct Side {
    mixture: BetaBinomialMixture,
    p: f64,
    n: f64,
    /// `+1`: evidence when counts are high (too many at or below x); `−1`: when low.
    sign: f64,
    one_sided: bool,
}

impl Side {
    fn new(test: &QuantileTest, n: f64, sign: f64, one_sided: bool) -> Side {
        let p = test.p;
        // Centred indicator values lie in [−p, 1−p] counting up, [−(1−p), p] counting down.
        let (g, h) = if sign > 0.0 {
            (p, 1.0 - p)
        } else {
            (1.0 - p, p)
        };
        let v_opt = test.n_opt * p * (1.0 - p);
        Side {
            mixture: BetaBinomialMixture::new(v_opt, test.alpha_opt, g, h, one_sided),
            p,
            n,
            sign,
            one_sided,
        }
    }

    fn at(&self, count: f64) -> f64 {
        if self.n <= 0.0 {
            return 0.0;
        }
        let s = self.sign * (count - self.p * self.n);
        self.mixture
            .log_super_mg(s, self.p * (1.0 - self.p) * self.n)
    }

    /// The least evidence over a range of counts. One-sided mixtures are monotone in the count;
    /// two-sided ones are convex, so a ternary search finds their minimum.
    fn least(&self, (lo, hi): (f64, f64)) -> f64 {
        if hi - lo < 1e-9 {
            return self.at(hi);
        }
        if self.one_sided {
            return self.at(lo).min(self.at(hi));
        }
        let (mut a, mut b) = (lo, hi);
        for _ in 0..100 {
            let m1 = a + (b - a) / 3.0;
            let m2 = b - (b - a) / 3.0;
            if self.at(m1) <= self.at(m2) {
                b = m2;
            } else {
                a = m1;
            }
        }
        self.at((a + b) / 2.0)
    }
}

/// The sequential test of one quantile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileTest {
    /// The quantile, in (0, 1).
    pub p: f64,
    /// Requests per variant at which the test is tuned to be most powerful.
    pub n_opt: f64,
    /// The level the mixture is tuned for (not the test's level, which is chosen per call).
    pub alpha_opt: f64,
    pub resolution: Resolution,
}

impl QuantileTest {
    pub fn new(p: f64, n_opt: f64) -> QuantileTest {
        QuantileTest {
            p,
            n_opt,
            alpha_opt: 0.05,
            resolution: Resolution::Interpolated,
        }
    }

    /// `ln` of the e-value against the `direction`'s null at ratio `ratio`: reject at level α
    /// when it reaches `ln(1/α)`. Never NaN; 0 or below means no evidence.
    pub fn log_evidence(
        &self,
        baseline: &Buckets,
        candidate: &Buckets,
        ratio: f64,
        direction: Direction,
    ) -> f64 {
        let sign = match direction {
            Direction::Worse => 1.0,
            Direction::NoWorse => -1.0,
        };
        // Worse: the candidate's counts too low, the baseline's too high; NoWorse the reverse.
        let c = Side::new(self, candidate.total, -sign, true);
        let b = Side::new(self, baseline.total, sign, true);
        self.infimum(baseline, candidate, ratio, &b, &c)
    }

    /// `ln` of the e-value against "the candidate's p-quantile is at most `limit`" (a check's
    /// absolute `max`): the candidate's requests at or below `limit` are too few for it.
    pub fn log_evidence_above(&self, candidate: &Buckets, limit: f64) -> f64 {
        if candidate.total <= 0.0 || limit.is_nan() {
            return 0.0;
        }
        let c = Side::new(self, candidate.total, -1.0, true);
        let exact = self.resolution == Resolution::Exact;
        evidence(c.least(count_at(candidate, &candidate.bounds, limit, exact)))
    }

    /// `ln` of the e-value against "the candidate's p-quantile is above `limit`": its
    /// requests at or below `limit` are too many for that (shown within a `max`).
    pub fn log_evidence_below(&self, candidate: &Buckets, limit: f64) -> f64 {
        if candidate.total <= 0.0 || limit.is_nan() {
            return 0.0;
        }
        let c = Side::new(self, candidate.total, 1.0, true);
        let exact = self.resolution == Resolution::Exact;
        evidence(c.least(count_at(candidate, &candidate.bounds, limit, exact)))
    }

    /// confseq's two-sided test of equal quantiles (ratio 1): `ln` of its e-value. Kept for the
    /// golden tests that tie this module to confseq's published values.
    pub fn log_evidence_two_sided(&self, a: &Buckets, b: &Buckets) -> f64 {
        let sa = Side::new(self, a.total, 1.0, false);
        let sb = Side::new(self, b.total, 1.0, false);
        self.infimum(a, b, 1.0, &sa, &sb)
    }

    /// The infimum over x of both arms' least evidence. The bounds of both histograms (the
    /// baseline's scaled by `ratio`) cut the line into segments; on each, an arm's count is
    /// constant (exact: a range) or linear in x (interpolated), so its evidence is constant or
    /// convex in x, and so is the sum: each segment is searched once.
    fn infimum(
        &self,
        baseline: &Buckets,
        candidate: &Buckets,
        ratio: f64,
        b: &Side,
        c: &Side,
    ) -> f64 {
        if baseline.total <= 0.0 || candidate.total <= 0.0 || ratio.is_nan() || ratio <= 0.0 {
            return 0.0;
        }
        let scaled: Vec<f64> = baseline.bounds.iter().map(|x| x * ratio).collect();
        let mut cuts: Vec<f64> = candidate
            .bounds
            .iter()
            .chain(scaled.iter())
            .copied()
            .collect();
        cuts.push(0.0);
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let exact = self.resolution == Resolution::Exact;
        let at = |x: f64| {
            let cand = count_at(candidate, &candidate.bounds, x, exact);
            let base = count_at(baseline, &scaled, x, exact);
            c.least(cand) + b.least(base)
        };
        let mut least = at(f64::INFINITY);
        for (i, &right) in cuts.iter().enumerate() {
            least = least.min(at(right));
            if exact {
                // Constant within each segment: its right end is the whole segment.
                continue;
            }
            let left = if i == 0 {
                f64::NEG_INFINITY
            } else {
                cuts[i - 1]
            };
            if !left.is_finite() {
                continue;
            }
            let (mut lo, mut hi) = (left, right);
            for _ in 0..24 {
                let m1 = lo + (hi - lo) / 3.0;
                let m2 = hi - (hi - lo) / 3.0;
                if at(m1) <= at(m2) {
                    hi = m2;
                } else {
                    lo = m1;
                }
            }
            least = least.min(at((lo + hi) / 2.0));
        }
        evidence(least)
    }

    /// The confidence sequence for the ratio candidate / baseline of the quantile at level
    /// `alpha` for each side: the largest ratio the candidate is shown to exceed and the
    /// smallest it is shown to stay within (`None`: not yet shown for any ratio in
    /// [1/1000, 1000]).
    pub fn ratio_bounds(&self, baseline: &Buckets, candidate: &Buckets, alpha: f64) -> RatioBounds {
        let threshold = (1.0 / alpha).ln();
        let worse =
            |r: f64| self.log_evidence(baseline, candidate, r, Direction::Worse) >= threshold;
        let within =
            |r: f64| self.log_evidence(baseline, candidate, r, Direction::NoWorse) >= threshold;
        RatioBounds {
            lower: boundary(worse, true),
            upper: boundary(within, false),
        }
    }

    /// Requests per variant before the `direction`'s null could be rejected at `alpha` by the
    /// most extreme data (every candidate request beyond every baseline one): below this no
    /// verdict is possible, whatever the requests show.
    pub fn minimum_requests(&self, alpha: f64, direction: Direction) -> f64 {
        let threshold = (1.0 / alpha).ln();
        let extreme = |n: f64| {
            let low = Buckets {
                bounds: vec![1.0, 2.0],
                cumulative: vec![n, n],
                total: n,
            };
            let high = Buckets {
                bounds: vec![1.0, 2.0],
                cumulative: vec![0.0, n],
                total: n,
            };
            match direction {
                Direction::Worse => self.log_evidence(&low, &high, 1.0, direction),
                Direction::NoWorse => self.log_evidence(&high, &low, 1.0, direction),
            }
        };
        let mut hi = 1.0;
        while extreme(hi) < threshold {
            hi *= 2.0;
            if hi > 1e9 {
                return f64::INFINITY;
            }
        }
        let mut lo = hi / 2.0;
        while hi - lo > 0.5 {
            let mid = (lo + hi) / 2.0;
            if extreme(mid) < threshold {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi.ceil()
    }
}
