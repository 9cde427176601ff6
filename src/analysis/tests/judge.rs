use crate::analysis::judge::*;
use crate::analysis::MannWhitney;
use crate::api::BuiltinMetric;
use crate::api::Check;
use crate::api::CheckResult;
use crate::api::Limit;
use crate::api::Verdict;

fn check(metric: Option<BuiltinMetric>) -> Check {
    Check {
        name: None,
        metric,
        query: None,
        quantile: None,
        min: None,
        max: None,
        max_increase: None,
        min_improvement: None,
    }
}

fn latency(max: Option<&str>, inc: Option<&str>) -> (Limits, Unit) {
    let mut c = check(Some(BuiltinMetric::Latency));
    c.max = max.map(|m| Limit::Text(m.into()));
    c.max_increase = inc.map(String::from);
    (Limits::from_check(&c).unwrap(), Unit::of(&c))
}

fn result(name: &str, verdict: Verdict) -> CheckResult {
    CheckResult {
        name: name.into(),
        baseline: None,
        candidate: None,
        limit: String::new(),
        verdict,
        reason: None,
        evidence: None,
    }
}

#[test]
fn limits_are_shown_as_written() {
    let (l, u) = latency(Some("500ms"), Some("10%"));
    assert_eq!(l.written, "max 500ms, maxIncrease 10%");
    assert_eq!(l.max, Some(0.5));
    assert!((l.max_increase.unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(u, Unit::Seconds);
    let mut c = check(None);
    c.name = Some("backlog".into());
    c.min = Some(Limit::Int(1));
    c.max = Some(Limit::Int(5));
    assert_eq!(Limits::from_check(&c).unwrap().written, "min 1, max 5");
    assert_eq!(Unit::of(&c), Unit::Plain);
    c.max = Some(Limit::Text("five".into()));
    let e = Limits::from_check(&c).unwrap_err();
    assert!(e.to_string().contains("checks[backlog].max"), "{e}");
}

#[test]
fn units_format_for_people() {
    assert_eq!(Unit::Seconds.format(0.4123), "412.3ms");
    assert_eq!(Unit::Seconds.format(1.5), "1.5s");
    assert_eq!(Unit::Bytes.format(512.0 * 1024.0 * 1024.0), "512Mi");
    assert_eq!(Unit::Bytes.format(1.5 * 1024f64.powi(3)), "1.5Gi");
    assert_eq!(Unit::Share.format(0.0123), "1.23%");
    assert_eq!(Unit::Plain.format(5.0), "5");
    let mut c = check(None);
    c.max = Some(Limit::Text("200ms".into()));
    assert_eq!(Unit::of(&c), Unit::Seconds);
    c.max = Some(Limit::Text("512Mi".into()));
    assert_eq!(Unit::of(&c), Unit::Bytes);
    c.max = Some(Limit::Text("3%".into()));
    assert_eq!(Unit::of(&c), Unit::Share);
}

#[test]
fn absolute_max_fails_the_candidate() {
    let (l, u) = latency(Some("500ms"), None);
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.612), None);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(
        reason,
        "candidate 612ms is above max 500ms (baseline 400ms)"
    );
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.5), None);
    assert_eq!(v, Verdict::Pass, "{reason}");
    // An absolute limit needs no baseline.
    let (v, _) = judge_check(&l, u, None, Some(0.3), None);
    assert_eq!(v, Verdict::Pass);
    let (v, _) = judge_check(&l, u, None, Some(0.9), None);
    assert_eq!(v, Verdict::Fail);
}

#[test]
fn absolute_min_fails_the_candidate() {
    let mut c = check(None);
    c.name = Some("throughput".into());
    c.min = Some(Limit::Int(10));
    let l = Limits::from_check(&c).unwrap();
    let (v, reason) = judge_check(&l, Unit::Plain, Some(12.0), Some(8.0), None);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(reason, "candidate 8 is below min 10 (baseline 12)");
    assert_eq!(
        judge_check(&l, Unit::Plain, Some(12.0), Some(10.0), None).0,
        Verdict::Pass
    );
}

#[test]
fn max_increase_is_relative_to_the_baseline_of_the_same_interval() {
    let (l, u) = latency(None, Some("10%"));
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.48), None);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(
        reason,
        "candidate 480ms is more than maxIncrease 10% above baseline 400ms (+20%; allowed up to 440ms)"
    );
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.44), None);
    assert_eq!(v, Verdict::Pass, "{reason}");
    assert!(reason.contains("candidate 440ms"), "{reason}");
    assert!(reason.contains("baseline 400ms"), "{reason}");
    // Better than the baseline always passes the relative limit.
    assert_eq!(
        judge_check(&l, u, Some(0.4), Some(0.1), None).0,
        Verdict::Pass
    );
}

#[test]
fn zero_baseline_tolerates_no_increase() {
    let mut c = check(Some(BuiltinMetric::ErrorRate));
    c.max_increase = Some("50%".into());
    let l = Limits::from_check(&c).unwrap();
    let u = Unit::of(&c);
    assert_eq!(
        judge_check(&l, u, Some(0.0), Some(0.0), None).0,
        Verdict::Pass
    );
    let (v, reason) = judge_check(&l, u, Some(0.0), Some(0.001), None);
    assert_eq!(v, Verdict::Fail);
    assert!(reason.contains("baseline 0%"), "{reason}");
    // Negative baselines: "x% worse" still means larger by x% of its magnitude.
    assert_eq!(Limits::allowed_above(-10.0, 0.1), -9.0);
}

#[test]
fn missing_or_broken_values_are_inconclusive() {
    let (l, u) = latency(Some("500ms"), Some("10%"));
    let (v, reason) = judge_check(&l, u, Some(0.4), None, None);
    assert_eq!(v, Verdict::Inconclusive);
    assert_eq!(reason, "no value for the candidate (baseline 400ms)");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let (v, _) = judge_check(&l, u, Some(0.4), Some(bad), None);
        assert_eq!(v, Verdict::Inconclusive, "{bad}");
    }
    // maxIncrease needs a baseline; an absolute-only check does not.
    let (v, reason) = judge_check(&l, u, None, Some(0.3), None);
    assert_eq!(v, Verdict::Inconclusive);
    assert!(reason.contains("no baseline value"), "{reason}");
    assert_eq!(
        judge_check(&l, u, Some(f64::NAN), Some(0.3), None).0,
        Verdict::Inconclusive
    );
    // ...but a broken max is a Fail even without a baseline.
    assert_eq!(judge_check(&l, u, None, Some(0.7), None).0, Verdict::Fail);
}

#[test]
fn statistics_add_to_the_single_interval_relative_judgement() {
    let (l, u) = latency(Some("500ms"), Some("10%"));
    let mw = |significant| MannWhitney {
        u: 30.0,
        p_value: if significant { 0.01 } else { 0.4 },
        n_baseline: 6,
        n_candidate: 6,
        alpha: 0.05,
        significant,
        exact: true,
    };
    // This interval is lucky (+2.5%), but the samples say worse.
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.41), Some(&mw(true)));
    assert_eq!(v, Verdict::Fail);
    assert_eq!(
        reason,
        "candidate 410ms vs baseline 400ms (+2.5%) is within max 500ms, maxIncrease 10%, but over \
         6 intervals the candidate is significantly above baseline + 10% (Mann-Whitney p = \
         0.0100, alpha 0.05)"
    );
    // Within the interval's limit and not significant over the samples: a pass that says both.
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.42), Some(&mw(false)));
    assert_eq!(v, Verdict::Pass, "{reason}");
    assert!(
        reason.contains("+5%") && reason.contains("not significantly above"),
        "{reason}"
    );
    // One very bad interval (+20%) fails even though the test finds nothing significant.
    let (v, reason) = judge_check(&l, u, Some(0.4), Some(0.48), Some(&mw(false)));
    assert_eq!(v, Verdict::Fail, "{reason}");
    assert!(reason.contains("more than maxIncrease 10%"), "{reason}");
    // Absolute limits still apply per interval.
    assert_eq!(
        judge_check(&l, u, Some(0.4), Some(0.6), Some(&mw(false))).0,
        Verdict::Fail
    );
}

#[test]
fn aggregation_needs_requests_then_all_passes() {
    let pass = [
        result("latency", Verdict::Pass),
        result("memory", Verdict::Pass),
    ];
    let (v, reason) = aggregate(&pass, Some(120.0), Some(80.0), 50);
    assert_eq!(v, Verdict::Pass);
    assert_eq!(
        reason,
        "all 2 checks passed (requests: baseline 120, candidate 80)"
    );

    let (v, reason) = aggregate(&pass, Some(120.0), Some(12.0), 50);
    assert_eq!(v, Verdict::Inconclusive);
    assert_eq!(
        reason,
        "too few requests in the interval: baseline 120, candidate 12 (minRequests 50)"
    );
    assert_eq!(
        aggregate(&pass, None, Some(80.0), 50).0,
        Verdict::Inconclusive
    );
    assert_eq!(
        aggregate(&pass, Some(f64::NAN), Some(80.0), 50).0,
        Verdict::Inconclusive
    );

    let mixed = [
        result("latency", Verdict::Fail),
        result("memory", Verdict::Inconclusive),
        result("gvlWait", Verdict::Fail),
    ];
    let (v, reason) = aggregate(&mixed, Some(100.0), Some(100.0), 50);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(reason, "failed: latency, gvlWait");
    // Too few requests outranks a failure: the values are noise.
    assert_eq!(
        aggregate(&mixed, Some(10.0), Some(100.0), 50).0,
        Verdict::Inconclusive
    );

    let open = [
        result("latency", Verdict::Pass),
        result("memory", Verdict::Inconclusive),
    ];
    let (v, reason) = aggregate(&open, Some(100.0), Some(100.0), 50);
    assert_eq!(v, Verdict::Inconclusive);
    assert_eq!(reason, "inconclusive: memory");
    assert_eq!(
        aggregate(&[], Some(100.0), Some(100.0), 0).0,
        Verdict::Inconclusive
    );
}

fn queue_time(max: Option<&str>, inc: Option<&str>) -> (Limits, Unit) {
    let mut c = check(Some(BuiltinMetric::QueueTime));
    c.quantile = Some(0.9);
    c.max = max.map(|m| Limit::Text(m.into()));
    c.max_increase = inc.map(String::from);
    (Limits::from_check(&c).unwrap(), Unit::of(&c))
}

#[test]
fn queue_time_max_fails_a_queueing_candidate_whatever_the_baseline() {
    let (l, u) = queue_time(Some("50ms"), None);
    assert_eq!((u, l.max, l.floor), (Unit::Seconds, Some(0.05), Some(0.01)));
    for base in [Some(0.0), Some(0.0009), Some(f64::NAN), None] {
        let (v, reason) = judge_check(&l, u, base, Some(2.0), None);
        assert_eq!(v, Verdict::Fail, "{base:?}: {reason}");
        assert!(
            reason.starts_with("candidate 2s is above max 50ms"),
            "{reason}"
        );
        let (v, reason) = judge_check(&l, u, base, Some(0.003), None);
        assert_eq!(v, Verdict::Pass, "{base:?}: {reason}");
    }
}

#[test]
fn queue_time_increase_from_no_queueing_is_judged_against_the_floor() {
    let (l, u) = queue_time(None, Some("50%"));
    // Baseline not queueing (~0, the histogram's first bucket) or nothing observed at all:
    // the candidate may reach floor × 1.5 = 15ms.
    for base in [Some(0.0), Some(0.0009), Some(f64::NAN), None] {
        let (v, reason) = judge_check(&l, u, base, Some(2.0), None);
        assert_eq!(v, Verdict::Fail, "{base:?}: {reason}");
        assert!(reason.contains("allowed up to 15ms"), "{reason}");
        assert!(reason.contains("below the floor 10ms"), "{reason}");
        let (v, reason) = judge_check(&l, u, base, Some(0.012), None);
        assert_eq!(v, Verdict::Pass, "{base:?}: {reason}");
        assert_eq!(judge_check(&l, u, base, Some(0.016), None).0, Verdict::Fail);
    }
    let (_, reason) = judge_check(&l, u, None, Some(2.0), None);
    assert!(reason.contains("baseline none (counted as 0)"), "{reason}");
    // Above the floor the usual rule holds: 100ms baseline allows 150ms.
    assert_eq!(
        judge_check(&l, u, Some(0.1), Some(0.14), None).0,
        Verdict::Pass
    );
    let (v, reason) = judge_check(&l, u, Some(0.1), Some(0.16), None);
    assert_eq!(v, Verdict::Fail);
    assert!(!reason.contains("floor"), "{reason}");
}

#[test]
fn queue_time_without_candidate_data_stays_inconclusive() {
    let (l, u) = queue_time(Some("50ms"), Some("50%"));
    for cand in [None, Some(f64::NAN)] {
        for base in [Some(0.0), Some(f64::NAN), None] {
            assert_eq!(
                judge_check(&l, u, base, cand, None).0,
                Verdict::Inconclusive,
                "{base:?} {cand:?}"
            );
        }
    }
    // A candidate without requests: Inconclusive even though the check itself passed.
    let checks = [result("queueTime", Verdict::Pass)];
    assert_eq!(
        aggregate(&checks, Some(100.0), Some(0.0), 50).0,
        Verdict::Inconclusive
    );
}

#[test]
fn queue_time_below_the_floor_is_not_tested_statistically() {
    let (l, u) = queue_time(None, Some("10%"));
    let significant = MannWhitney {
        u: 30.0,
        p_value: 0.01,
        n_baseline: 6,
        n_candidate: 6,
        alpha: 0.05,
        significant: true,
        exact: true,
    };
    // 2ms vs 4ms is "significantly" worse but not queueing: the floor rule decides.
    let (v, reason) = judge_check(&l, u, Some(0.002), Some(0.004), Some(&significant));
    assert_eq!(v, Verdict::Pass, "{reason}");
    // Above the floor the test applies as for latency.
    let (v, reason) = judge_check(&l, u, Some(0.2), Some(0.21), Some(&significant));
    assert_eq!(v, Verdict::Fail, "{reason}");
    // Latency keeps its rules: no floor, a NaN baseline is Inconclusive for maxIncrease.
    let (lat, lu) = latency(None, Some("50%"));
    assert_eq!(lat.floor, None);
    assert_eq!(
        judge_check(&lat, lu, Some(f64::NAN), Some(0.3), None).0,
        Verdict::Inconclusive
    );
}

#[test]
fn memory_growth_reads_per_hour_and_time_to_limit_in_hours() {
    let mut c = check(Some(BuiltinMetric::MemoryGrowth));
    c.max = Some(Limit::Text("50Mi".into()));
    let (limits, unit) = (Limits::from_check(&c).unwrap(), Unit::of(&c));
    let (v, why) = judge_check(
        &limits,
        unit,
        Some(0.0),
        Some(2.0 * 1024.0 * 1024.0 * 1024.0),
        None,
    );
    assert_eq!(v, Verdict::Fail);
    assert_eq!(why, "candidate 2Gi/h is above max 50Mi/h (baseline 0Mi/h)");
    let mut c = check(Some(BuiltinMetric::TimeToLimit));
    c.min = Some(Limit::Text("24h".into()));
    let (limits, unit) = (Limits::from_check(&c).unwrap(), Unit::of(&c));
    let (v, why) = judge_check(&limits, unit, Some(315_360_000.0), Some(300.0), None);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(why, "candidate 5m is below min 24h (baseline 87600h)");
}
