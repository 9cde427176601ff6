//! The fixed-horizon test and its power analysis on distributions whose answer is known: the
//! level it claims on A/A samples, the power it plans for, and sample sizes that shrink as the
//! regression grows.

use judge_bench::bootstrap::Rng;
use judge_bench::fixed::{critical, statistic, Design, Shape};

/// Latency-like buckets (yabeda's spacing) and a spread-out distribution over them.
fn shape() -> Shape {
    Shape {
        bounds: vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5],
        cumulative: vec![0.02, 0.08, 0.25, 0.5, 0.75, 0.9, 0.96, 0.99, 0.998, 1.0],
    }
}

fn design(draws: usize) -> Design {
    Design {
        p: 0.9,
        ratio: 1.1,
        alpha: 0.05,
        power: 0.95,
        floor: None,
        draws,
    }
}

#[test]
fn critical_values_are_the_normals() {
    assert!((critical(0.05) - 1.6449).abs() < 1e-3);
    assert!((critical(0.0167) - 2.128).abs() < 2e-3);
}

#[test]
fn a_sample_has_the_size_and_shape_it_was_drawn_with() {
    let mut rng = Rng(7);
    let b = shape().sample(100_000, &mut rng);
    assert_eq!(b.total, 100_000.0);
    // The median bucket's bound holds about half the requests.
    assert!((b.cumulative[3] / b.total - 0.5).abs() < 0.01, "{b:?}");
    let small = shape().sample(20, &mut rng);
    assert!(small
        .cumulative
        .iter()
        .all(|c| *c <= 20.0 && c.fract() == 0.0));
}

#[test]
fn an_a_a_comparison_is_rejected_at_most_alpha_of_the_time() {
    let mut rng = Rng(11);
    let d = design(2000);
    // At the tolerance's edge (the candidate's p90, as read, exactly 1.1 × the baseline's)
    // the null still holds.
    let p90 = shape().quantile(0.9).unwrap();
    let edge = shape().slowed_to(0.9, 1.1 * p90).unwrap();
    let rejected = d.power_at(2000, &shape(), &edge, &mut rng);
    assert!(
        rejected <= 0.065,
        "rejected {rejected} at the edge of the null"
    );
    let same = d.power_at(2000, &shape(), &shape(), &mut rng);
    assert!(same <= 0.01, "rejected {same} of A/A");
}

#[test]
fn a_regression_is_rejected_and_bigger_ones_need_fewer_requests() {
    let mut rng = Rng(13);
    let d = design(200);
    let p90 = shape().quantile(0.9).unwrap();
    let twice = shape().slowed_to(0.9, 2.0 * p90).unwrap();
    assert!(d.power_at(2000, &shape(), &twice, &mut rng) >= 0.95);
    let n2 = d.requests(&shape(), &twice, &mut rng).unwrap();
    let slower = shape().slowed_to(0.9, 1.5 * p90).unwrap();
    let n15 = d.requests(&shape(), &slower, &mut rng).unwrap();
    assert!(n2 < n15, "×2 needs {n2}, ×1.5 {n15}");
    assert!((50..2000).contains(&n2), "×2 needs {n2}");
}

#[test]
fn a_slowdown_is_read_as_the_dashboards_read_it() {
    let p90 = shape().quantile(0.9).unwrap();
    let slower = shape().slowed_to(0.9, 1.5 * p90).unwrap();
    assert!((slower.quantile(0.9).unwrap() / p90 - 1.5).abs() < 0.01);
    assert_eq!(slower.bounds, shape().bounds);
    assert!(shape().slowed_to(0.9, 1e9).is_none());
}

#[test]
fn the_statistic_points_the_right_way() {
    let mut rng = Rng(17);
    let b = shape().sample(5000, &mut rng);
    let c = shape().scaled(3.0).sample(5000, &mut rng);
    assert!(statistic(0.9, &b, &c, 1.1) > 10.0);
    assert!(statistic(0.9, &c, &b, 1.1) < 0.0);
}

/// The smallest over x found exactly, against a fine grid of x read the same way: where the two
/// arms' lines cross inside a bucket, not only at the bounds.
#[test]
fn the_statistic_is_the_smallest_over_every_x() {
    use concurrency_operator::analysis::sequential::count_at;
    let mut rng = Rng(19);
    let (p, ratio) = (0.9, 1.1);
    let p90 = shape().quantile(0.9).unwrap();
    for n in [200, 1000, 5000] {
        let b = shape().sample(n, &mut rng);
        let c = shape()
            .slowed_to(0.9, 1.3 * p90)
            .unwrap()
            .sample(n, &mut rng);
        let scaled: Vec<f64> = b.bounds.iter().map(|x| x * ratio).collect();
        let s = (p * (1.0 - p) * n as f64).sqrt();
        let grid = (0..=200_000)
            .map(|i| 3.0 * f64::from(i) / 200_000.0)
            .map(|x| {
                let kc = count_at(&c, &c.bounds, x, false).1;
                let kb = count_at(&b, &scaled, x, false).0;
                ((p * n as f64 - kc) / s).max((kb - p * n as f64) / s)
            })
            .fold(f64::INFINITY, f64::min);
        let exact = statistic(p, &b, &c, ratio);
        assert!(
            exact <= grid + 1e-9,
            "n {n}: {exact} above the grid's {grid}"
        );
        assert!(
            exact >= grid - 0.01,
            "n {n}: {exact} far below the grid's {grid}"
        );
    }
}
