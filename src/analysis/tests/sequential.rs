//! The anytime-valid tests: golden values from confseq's own unit tests (its C++ suite, itself
//! checked against a reference implementation in R), then the properties the judge relies on.

use crate::analysis::sequential::mixture::BetaBinomialMixture;
use crate::analysis::sequential::rate::{self, Counts};
use crate::analysis::sequential::{Buckets, Direction, QuantileTest, Resolution};

fn near(actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{actual} is not within {tolerance} of {expected}"
    );
}

#[test]
fn the_beta_binomial_mixture_matches_confseq() {
    // confseq test/uniform_boundaries_unittest.cpp: V_OPT 100, ALPHA_OPT 0.05, ALPHA 0.05.
    let two = BetaBinomialMixture::new(100.0, 0.05, 0.2, 0.8, false);
    near(two.log_super_mg(10.0, 100.0), -0.6941012, 1e-5);
    near(two.bound(100.0, 0.05), 31.4308, 1e-4);
    let one = BetaBinomialMixture::new(100.0, 0.05, 0.2, 0.8, true);
    near(one.log_super_mg(10.0, 100.0), -0.07134019, 1e-5);
    near(one.bound(100.0, 0.05), 28.41238, 1e-4);
    // With too little variance the boundary is the largest sum possible, v/g.
    near(one.bound(2.0 * 0.2 * 0.8, 0.05), 2.0 * 0.8, 1e-5);
}

/// confseq's `bernoulli_confidence_interval`: the mixture at every p, inverted by bisection.
fn bernoulli_interval(successes: f64, trials: f64, alpha: f64, t_opt: f64) -> (f64, f64) {
    let empirical = successes / trials;
    let excess = |p: f64| {
        let m = BetaBinomialMixture::new(p * (1.0 - p) * t_opt, 0.05, p, 1.0 - p, false);
        m.log_super_mg((empirical - p) * trials, p * (1.0 - p) * trials) - (1.0 / alpha).ln()
    };
    let bisect = |mut inside: f64, mut outside: f64| {
        for _ in 0..100 {
            let mid = (inside + outside) / 2.0;
            if excess(mid) < 0.0 {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        (inside + outside) / 2.0
    };
    (bisect(empirical, 0.0), bisect(empirical, 1.0))
}

#[test]
fn the_mixture_inverted_gives_confseqs_bernoulli_intervals() {
    let (lo, hi) = bernoulli_interval(700.0, 1000.0, 0.05, 100.0);
    near(lo, 0.651629, 1e-5);
    near(hi, 0.745949, 1e-5);
    let (lo, hi) = bernoulli_interval(15.0, 50.0, 0.05, 50.0);
    near(lo, 0.129556, 1e-5);
    near(hi, 0.511896, 1e-5);
    let (lo, hi) = bernoulli_interval(100.0, 200.0, 0.05, 1.0);
    near(lo, 0.328923, 1e-5);
    near(hi, 0.671076, 1e-5);
}

/// Integer values as a histogram with a bucket bound between every two integers: counts at or
/// below any x are then known exactly up to ties, as for raw values.
fn integer_histogram(values: impl Iterator<Item = u32>, max: u32) -> Buckets {
    let mut per = vec![0.0; max as usize + 1];
    for v in values {
        per[v as usize] += 1.0;
    }
    let mut running = 0.0;
    let mut pairs: Vec<(f64, f64)> = (0..=max)
        .map(|k| {
            running += per[k as usize];
            (f64::from(k) + 0.5, running)
        })
        .collect();
    pairs.push((f64::INFINITY, running));
    Buckets::from_pairs(pairs)
}

#[test]
fn the_two_sided_quantile_test_matches_confseqs_p_values() {
    // confseq's QuantileABTest on 1..=1000 against offset+1..=offset+1000, t_opt 100.
    let p_value = |p: f64, offset: u32| {
        let a = integer_histogram(1..=1000, 1200);
        let b = integer_histogram(offset + 1..=offset + 1000, 1200);
        let test = QuantileTest {
            resolution: Resolution::Exact,
            ..QuantileTest::new(p, 100.0)
        };
        let e = test.log_evidence_two_sided(&a, &b);
        (-e).exp().min(1.0)
    };
    near(p_value(0.5, 70), 0.814704, 1e-5);
    near(p_value(0.5, 85), 0.0838055, 1e-5);
    near(p_value(0.5, 100), 0.0054947, 1e-5);
    near(p_value(0.9, 55), 0.0340463, 1e-5);
}

/// SplitMix64: a deterministic generator, so these tests cannot flake.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A latency: log-normal around 50 ms, scaled.
    fn latency(&mut self, scale: f64) -> f64 {
        let (u1, u2) = (self.next().max(1e-12), self.next());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        0.05 * (0.6 * z).exp() * scale
    }
}

/// yabeda-rails' request-duration buckets.
const RAILS_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Adds `n` latencies to cumulative bucket counts.
fn observe(b: &mut Buckets, rng: &mut Rng, n: usize, scale: f64) {
    if b.bounds.is_empty() {
        b.bounds = RAILS_BUCKETS.to_vec();
        b.cumulative = vec![0.0; RAILS_BUCKETS.len()];
    }
    for _ in 0..n {
        let x = rng.latency(scale);
        for (bound, c) in b.bounds.iter().zip(b.cumulative.iter_mut()) {
            if x <= *bound {
                *c += 1.0;
            }
        }
        b.total += 1.0;
    }
}

/// Looks (analyses) until the "worse than 1.1×" null is rejected, or `None` after `looks`.
fn looks_to_rollback(
    seed: u64,
    p: f64,
    scale: f64,
    per_look: usize,
    looks: usize,
) -> Option<usize> {
    let mut rng = Rng(seed);
    let test = QuantileTest::new(p, 500.0);
    let (mut base, mut cand) = (Buckets::default(), Buckets::default());
    (1..=looks).find(|_| {
        observe(&mut base, &mut rng, per_look, 1.0);
        observe(&mut cand, &mut rng, per_look, scale);
        test.log_evidence(&base, &cand, 1.1, Direction::Worse) >= (1.0f64 / 0.05).ln()
    })
}

#[test]
fn looking_after_every_interval_keeps_the_false_rollbacks_under_alpha() {
    // 100 A/A experiments of 15 looks (the bench runs thousands): a fixed threshold would
    // reject more with every look.
    for p in [0.5, 0.99] {
        let false_rollbacks = (0..100)
            .filter(|seed| looks_to_rollback(*seed, p, 1.0, 100, 15).is_some())
            .count();
        assert!(false_rollbacks <= 5, "p{p}: {false_rollbacks} of 100");
    }
}

#[test]
fn a_doubled_quantile_is_rolled_back_within_a_few_looks() {
    for p in [0.5, 0.9] {
        let looks: Vec<usize> = (1000..1100)
            .filter_map(|seed| looks_to_rollback(seed, p, 2.0, 100, 10))
            .collect();
        assert!(
            looks.len() >= 98,
            "p{p}: only {} of 100 caught",
            looks.len()
        );
        let mut sorted = looks.clone();
        sorted.sort();
        // A ×2 regression at p90 is seen within 250 requests per variant in most runs.
        assert!(
            sorted[sorted.len() / 2] <= 3,
            "p{p}: median {} looks",
            sorted[sorted.len() / 2]
        );
    }
}

/// The quantile `histogram_quantile` would report for the whole population of `latency(scale)`
/// in `RAILS_BUCKETS`: the log-normal's CDF at each bound, interpolated linearly.
fn interpolated_quantile(p: f64, scale: f64) -> f64 {
    let cdf = |x: f64| {
        let z = (x / (0.05 * scale)).ln() / 0.6;
        0.5 * statrs::function::erf::erfc(-z / std::f64::consts::SQRT_2)
    };
    let (mut lower, mut below) = (0.0, 0.0);
    for bound in RAILS_BUCKETS {
        let at = cdf(bound);
        if at >= p {
            return lower + (bound - lower) * (p - below) / (at - below);
        }
        (lower, below) = (bound, at);
    }
    lower
}

#[test]
fn the_ratio_bounds_contain_the_true_ratio() {
    let mut rng = Rng(7);
    let (mut base, mut cand) = (Buckets::default(), Buckets::default());
    observe(&mut base, &mut rng, 20_000, 1.0);
    observe(&mut cand, &mut rng, 20_000, 1.5);
    let bounds = QuantileTest::new(0.9, 500.0).ratio_bounds(&base, &cand, 0.05);
    let (lower, upper) = (bounds.lower.unwrap(), bounds.upper.unwrap());
    // The ratio of the quantiles as the buckets show them, not the latencies' 1.5.
    let truth = interpolated_quantile(0.9, 1.5) / interpolated_quantile(0.9, 1.0);
    assert!(
        lower < truth && upper > truth,
        "{lower} .. {truth} .. {upper}"
    );
    assert!(
        lower > 1.0,
        "a 50 % regression is shown with 20,000 requests: {lower}"
    );
}

#[test]
fn each_quantile_needs_its_own_number_of_requests_before_any_verdict() {
    let needs = |p: f64| QuantileTest::new(p, 500.0).minimum_requests(0.05, Direction::Worse);
    let (p50, p90, p99) = (needs(0.5), needs(0.9), needs(0.99));
    assert!((5.0..100.0).contains(&p50), "p50 {p50}");
    assert!((20.0..300.0).contains(&p90), "p90 {p90}");
    assert!((200.0..2000.0).contains(&p99), "p99 {p99}");
}

#[test]
fn error_rates_five_times_the_baselines_are_shown_and_equal_ones_are_not() {
    let interval = |kb: f64, kc: f64| Counts {
        baseline_requests: 700.0,
        baseline_errors: kb,
        candidate_requests: 300.0,
        candidate_errors: kc,
    };
    let threshold = (1.0f64 / 0.05).ln();
    // 1 % against 5 %, three intervals.
    let worse = vec![interval(7.0, 15.0); 3];
    assert!(rate::log_evidence(&worse, 1.1, Direction::Worse) >= threshold);
    let bounds = rate::ratio_bounds(&worse, 0.05);
    assert!(
        bounds.lower.unwrap() > 2.0 && bounds.lower.unwrap() < 5.0,
        "{bounds:?}"
    );
    // Equal rates: no evidence of a regression; after long enough, evidence of none.
    let equal = vec![interval(7.0, 3.0); 3];
    assert!(rate::log_evidence(&equal, 1.1, Direction::Worse) < threshold);
    let long = vec![interval(70.0, 30.0); 10];
    assert!(rate::log_evidence(&long, 1.5, Direction::NoWorse) >= threshold);
    // No errors at all: no evidence either way.
    let none = vec![interval(0.0, 0.0); 10];
    assert_eq!(rate::log_evidence(&none, 1.1, Direction::Worse), 0.0);
}
