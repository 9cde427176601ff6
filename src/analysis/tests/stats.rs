use crate::analysis::stats::*;
use crate::api::AnalysisRecord;
use crate::api::Statistical;
use crate::api::{CheckResult, Verdict};

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b}");
}

#[test]
fn normal_tail_matches_tables() {
    close(upper_normal_tail(1.959964), 0.025, 1e-6);
    close(upper_normal_tail(1.644854), 0.05, 1e-6);
    close(upper_normal_tail(0.0), 0.5, 1e-12);
    close(upper_normal_tail(-1.644854), 0.95, 1e-6);
}

#[test]
fn exact_distribution_matches_textbook_counts() {
    // n1 = n2 = 3: the most extreme arrangement is 1 of C(6,3) = 20.
    let (u, p, exact) = mann_whitney_greater(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
    assert!(exact);
    assert_eq!(u, 9.0);
    close(p, 1.0 / 20.0, 1e-12);
    // n1 = n2 = 4: 1 of 70.
    let (_, p, _) = mann_whitney_greater(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
    close(p, 1.0 / 70.0, 1e-12);
    // n1 = n2 = 5, U = 21 (i.e. 4 from the other side): the table's one-sided 5% critical
    // value, P = 12/252 = 0.0476; U = 20: 19/252 = 0.0754.
    let b = [1.0, 2.0, 3.0, 4.0, 9.0];
    let (u, p, _) = mann_whitney_greater(&b, &[5.0, 6.0, 7.0, 8.0, 10.0]).unwrap();
    assert_eq!(u, 21.0);
    close(p, 12.0 / 252.0, 1e-12);
    let b = [1.0, 2.0, 3.0, 4.0, 10.0];
    let (u, p, _) = mann_whitney_greater(&b, &[5.0, 6.0, 7.0, 8.0, 9.0]).unwrap();
    assert_eq!(u, 20.0);
    close(p, 19.0 / 252.0, 1e-12);
    // The other direction is not significant.
    let (u, p, _) = mann_whitney_greater(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
    assert_eq!(u, 0.0);
    close(p, 1.0, 1e-12);
}

#[test]
fn ties_use_midranks_and_the_corrected_normal_approximation() {
    // Ranks: 1,1 → 1.5; 2,2,2 → 4; 3,3,3 → 7. R = 4 + 21 = 25, U = 15, tie term 54,
    // var = 16/12 · (9 − 54/56), z = (15 − 8 − 0.5)/sd = 1.98578, P = 0.023529 (by hand).
    let (u, p, exact) = mann_whitney_greater(&[1.0, 1.0, 2.0, 2.0], &[2.0, 3.0, 3.0, 3.0]).unwrap();
    assert!(!exact);
    assert_eq!(u, 15.0);
    close(p, 0.023528723, 1e-8);
    // All equal: no evidence.
    let (_, p, _) = mann_whitney_greater(&[1.0; 5], &[1.0; 5]).unwrap();
    close(p, 1.0, 0.0);
    assert!(mann_whitney_greater(&[], &[1.0]).is_none());
    assert!(mann_whitney_greater(&[f64::NAN], &[1.0]).is_none());
}

#[test]
fn normal_approximation_agrees_with_exact_for_larger_samples() {
    // 26 per side forces the approximation; the exact tail of the same U must be close.
    let b: Vec<f64> = (0..26).map(|i| (i * 2) as f64).collect();
    let c: Vec<f64> = (0..26).map(|i| (i * 2 + 9) as f64).collect();
    let (u, p_normal, exact) = mann_whitney_greater(&b, &c).unwrap();
    assert!(!exact);
    let p_exact = exact_upper_tail(26, 26, u as usize);
    assert!(p_exact > 0.001 && p_exact < 0.2, "{p_exact}");
    close(p_normal, p_exact, 0.002);
}

fn spec() -> Statistical {
    Statistical {
        alpha: 0.05,
        min_samples: 5,
    }
}

#[test]
fn a_consistent_regression_is_significant_even_if_one_interval_was_lucky() {
    // Candidate ~30% slower in five intervals, the sixth within 10%.
    let b = [0.200, 0.210, 0.190, 0.205, 0.195, 0.200];
    let c = [0.260, 0.275, 0.250, 0.270, 0.255, 0.215];
    let mw = compare(&spec(), 0.10, &b, &c).unwrap();
    assert!(mw.significant, "{mw:?}");
}

#[test]
fn noise_is_not_a_regression() {
    // Around the baseline, one interval 25% above.
    let b = [0.200, 0.210, 0.190, 0.205, 0.195, 0.200];
    let c = [0.195, 0.205, 0.200, 0.250, 0.190, 0.210];
    let mw = compare(&spec(), 0.10, &b, &c).unwrap();
    assert!(!mw.significant, "{mw:?}");
    // Too few intervals: no statistical judgement yet.
    assert!(compare(&spec(), 0.10, &b[..4], &c[..4]).is_none());
}

fn record(b_req: f64, c_req: f64, base: Option<f64>, cand: Option<f64>) -> AnalysisRecord {
    AnalysisRecord {
        at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        stage_index: 0,
        weight: 30,
        verdict: Verdict::Pass,
        baseline_requests: Some(b_req),
        candidate_requests: Some(c_req),
        checks: vec![CheckResult {
            name: "latency".into(),
            baseline: base,
            candidate: cand,
            limit: String::new(),
            verdict: Verdict::Pass,
            reason: None,
            evidence: None,
        }],
        reason: None,
        capacity: None,
    }
}

#[test]
fn samples_skip_thin_and_missing_intervals() {
    let history = vec![
        record(100.0, 100.0, Some(1.0), Some(2.0)),
        record(100.0, 10.0, Some(1.0), Some(9.0)), // too few candidate requests
        record(100.0, 100.0, None, Some(9.0)),
        record(100.0, 100.0, Some(f64::NAN), Some(9.0)),
        record(100.0, 100.0, Some(3.0), Some(4.0)),
    ];
    let (b, c) = samples("latency", &history, 50, (Some(5.0), Some(6.0)));
    assert_eq!(b, vec![1.0, 3.0, 5.0]);
    assert_eq!(c, vec![2.0, 4.0, 6.0]);
    let (b, _) = samples("memory", &history, 50, (None, Some(1.0)));
    assert!(b.is_empty());
}

mod improvement {
    use crate::analysis::improvement::judge_one;
    use crate::analysis::judge::Unit;
    use crate::api::Statistical;

    #[test]
    fn the_median_interval_must_improve_by_the_share() {
        let b = [0.20, 0.21, 0.19, 0.20];
        let c = [0.13, 0.14, 0.16, 0.12];
        let i = judge_one("latency", 0.30, Unit::Seconds, &b, &c, None);
        // Improvements 35 %, 33.3 %, 15.8 %, 40 %: median 34.2 %.
        assert!(i.met, "{}", i.detail);
        assert!((i.measured.unwrap() - 0.3417).abs() < 1e-3);
        assert_eq!(
            i.detail,
            "latency: candidate 135ms vs baseline 200ms (medians of 4 intervals), better by \
             34.2%: at least the required 30%"
        );
        let i = judge_one("latency", 0.40, Unit::Seconds, &b, &c, None);
        assert!(!i.met);
        // Worse is said as worse.
        let i = judge_one("latency", 0.30, Unit::Seconds, &c, &b, None);
        assert!(!i.met);
        assert!(i.detail.contains("worse by"), "{}", i.detail);
    }

    #[test]
    fn zero_baselines_and_no_data_never_meet_it() {
        let i = judge_one(
            "dbPoolWait",
            0.3,
            Unit::Share,
            &[0.0, 0.0],
            &[0.0, 0.0],
            None,
        );
        assert!(!i.met);
        assert_eq!(i.measured, None);
        assert!(i.detail.contains("no interval"), "{}", i.detail);
        let i = judge_one("latency", 0.3, Unit::Seconds, &[], &[], None);
        assert!(!i.met);
    }

    #[test]
    fn statistical_needs_a_significant_shift_below_the_lowered_baseline() {
        let s = Statistical {
            alpha: 0.05,
            min_samples: 5,
        };
        let b = [0.200, 0.210, 0.190, 0.205, 0.195, 0.200];
        // Clearly 50 % better in every interval: significant.
        let c = [0.100, 0.105, 0.095, 0.102, 0.098, 0.100];
        let i = judge_one("latency", 0.30, Unit::Seconds, &b, &c, Some(&s));
        assert!(i.met, "{}", i.detail);
        assert!(i.detail.contains("Mann-Whitney"), "{}", i.detail);
        // A median of 31 % whose intervals straddle the 30 % line: not significant.
        let c = [0.150, 0.120, 0.140, 0.141, 0.125, 0.138];
        let i = judge_one("latency", 0.30, Unit::Seconds, &b, &c, Some(&s));
        assert!(!i.met, "{}", i.detail);
        assert!(i.detail.contains("not significantly"), "{}", i.detail);
    }
}
