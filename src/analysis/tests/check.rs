use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::analysis;
use crate::analysis::check::{judge_measured, Measured};
use crate::analysis::{last_baseline, Limits, Unit};
use crate::api::{AnalysisRecord, CheckResult, Verdict};

fn latency_result(b: f64, c: f64) -> CheckResult {
    CheckResult {
        name: "latency".into(),
        baseline: Some(b),
        candidate: Some(c),
        limit: String::new(),
        verdict: Verdict::Pass,
        reason: None,
        evidence: None,
    }
}

#[test]
fn thin_intervals_do_not_feed_the_statistics() {
    let mut a = analysis(r#"[{metric: latency, maxIncrease: "10%"}]"#);
    a.statistical = Some(crate::api::Statistical {
        alpha: 0.05,
        min_samples: 6,
    });
    let past = |i: u32| AnalysisRecord {
        at: Time(Timestamp::UNIX_EPOCH),
        stage_index: 0,
        weight: 30,
        verdict: Verdict::Fail,
        baseline_requests: Some(100.0),
        candidate_requests: Some(100.0),
        checks: vec![latency_result(
            0.39 + f64::from(i) * 0.005,
            0.8 + f64::from(i) * 0.01,
        )],
        reason: None,
        capacity: None,
    };
    let history: Vec<AnalysisRecord> = (0..5).map(past).collect();
    let measured = || Measured {
        result: latency_result(0.4, 0.41),
        limits: Some((Limits::from_check(&a.checks[0]).unwrap(), Unit::Seconds)),
        query: None,
    };
    // With the current interval: 6 samples, 5 of them clearly slower (exact p = 30/924).
    let r = judge_measured(measured(), &a, &history, true);
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.reason.unwrap().contains("Mann-Whitney"));
    // Without it: 5 samples, too few; judged on this interval alone (+2.5%).
    let r = judge_measured(measured(), &a, &history, false);
    assert_eq!(r.verdict, Verdict::Pass);
    assert!(!r.reason.unwrap().contains("Mann-Whitney"));
    // Unmeasured checks keep their reason.
    let mut unmeasured = latency_result(0.4, 0.41);
    unmeasured.verdict = Verdict::Inconclusive;
    unmeasured.reason = Some("candidate query failed".into());
    let r = judge_measured(
        Measured {
            result: unmeasured.clone(),
            limits: None,
            query: None,
        },
        &a,
        &history,
        true,
    );
    assert_eq!(r, unmeasured);
}

#[test]
fn at_100_percent_the_baseline_reference_is_its_last_measured_value() {
    let rec = |weight: i32, baseline: Option<f64>| AnalysisRecord {
        at: Time(Timestamp::UNIX_EPOCH),
        stage_index: 0,
        weight,
        verdict: Verdict::Pass,
        baseline_requests: Some(100.0),
        candidate_requests: Some(100.0),
        checks: vec![CheckResult {
            baseline,
            ..latency_result(0.0, 0.1)
        }],
        reason: None,
        capacity: None,
    };
    let history = vec![
        rec(33, Some(0.05)),
        rec(67, Some(0.06)),
        rec(67, None),
        rec(100, Some(9.0)),
    ];
    // The latest value measured while the baseline served traffic; none at 100%.
    assert_eq!(last_baseline(&history, "latency"), Some(0.06));
    assert_eq!(last_baseline(&history, "memory"), None);
    assert_eq!(last_baseline(&[], "latency"), None);
}

#[test]
fn the_fit_window_is_the_stage_so_far_within_an_interval_and_a_day() {
    use crate::analysis::context::fit_window;
    use std::time::Duration;
    let now = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(100_000);
    let ago = |s: i64| Some(now - jiff::SignedDuration::from_secs(s));
    let i = Duration::from_secs(60);
    assert_eq!(fit_window(ago(1800), now, i), Duration::from_secs(1800));
    // Just entered: one interval.
    assert_eq!(fit_window(ago(10), now, i), i);
    assert_eq!(fit_window(None, now, i), i);
    // A clock ahead of now is not a negative window.
    assert_eq!(fit_window(ago(-50), now, i), i);
    assert_eq!(fit_window(ago(90_000), now, i), Duration::from_secs(86_400));
}

#[test]
fn a_queue_time_check_without_the_header_says_so_when_requests_were_served() {
    use crate::analysis::queue_header::note_missing_header;
    let specs = analysis("[{metric: queueTime, max: 50ms}, {metric: latency, max: 1s}]").checks;
    let result = |name: &str, candidate: Option<f64>| CheckResult {
        name: name.into(),
        baseline: None,
        candidate,
        limit: String::new(),
        verdict: Verdict::Inconclusive,
        reason: Some("no value for the candidate (no baseline value)".into()),
        evidence: None,
    };
    let checks = vec![result("queueTime", Some(f64::NAN)), result("latency", None)];
    let noted = note_missing_header(&specs, checks.clone(), Some(312.0), 50);
    let reason = noted[0].reason.clone().unwrap();
    assert!(
        reason.starts_with("no request of the candidate carried X-Request-Start (312 served"),
        "{reason}"
    );
    // Other checks, and a candidate without traffic, keep their reasons.
    assert_eq!(noted[1].reason, checks[1].reason);
    let quiet = note_missing_header(&specs, checks.clone(), Some(3.0), 50);
    assert_eq!(quiet[0].reason, checks[0].reason);
}
