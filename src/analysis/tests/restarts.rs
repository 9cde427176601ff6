use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::analysis::restarts;

fn pod(name: &str, statuses: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"phase": "Running", "containerStatuses": statuses}
    }))
    .unwrap()
}

fn container(name: &str, restarts: i32, last: Option<(&str, i32, &str)>) -> serde_json::Value {
    let mut c = json!({
        "name": name, "ready": true, "restartCount": restarts, "image": "x", "imageID": "",
        "state": {"running": {"startedAt": "2026-12-04T10:00:00Z"}}
    });
    if let Some((reason, code, at)) = last {
        c["lastState"] =
            json!({"terminated": {"reason": reason, "exitCode": code, "finishedAt": at}});
    }
    c
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn an_oom_kill_of_the_app_container_is_a_recent_restart_with_its_reason() {
    let pods = [
        pod(
            "web-canary-b",
            json!([
                container("web", 2, Some(("OOMKilled", 137, "2026-12-04T10:05:00Z"))),
                container("sidecar", 7, Some(("Error", 1, "2026-12-04T10:06:00Z"))),
            ]),
        ),
        pod("web-canary-a", json!([container("web", 0, None)])),
    ];
    let r = restarts(&pods, "web", Some(ts("2026-12-04T10:04:00Z")));
    // The sidecar's restarts are not the app's.
    assert_eq!(r.total, 2);
    assert_eq!(r.recent.len(), 1);
    assert_eq!(
        r.recent[0].describe("web"),
        "container web of pod web-canary-b: OOMKilled (exit code 137) at 2026-12-04T10:05:00Z"
    );
}

#[test]
fn a_restart_before_the_previous_analysis_is_counted_but_not_recent() {
    let pods = [pod(
        "web-canary-a",
        json!([container(
            "web",
            1,
            Some(("OOMKilled", 137, "2026-12-04T10:05:00Z"))
        )]),
    )];
    let r = restarts(&pods, "web", Some(ts("2026-12-04T10:06:00Z")));
    assert_eq!((r.total, r.recent.len()), (1, 0));
    // Without a previous analysis every restart of the experiment's own pods is recent.
    assert_eq!(restarts(&pods, "web", None).recent.len(), 1);
}

#[test]
fn a_crash_looping_container_and_an_evicted_pod_are_restarts() {
    let mut crashing = container("web", 3, Some(("Error", 1, "2026-12-04T10:05:00Z")));
    crashing["state"] = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    let evicted: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-canary-z"},
        "status": {"phase": "Failed", "reason": "Evicted",
                   "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-04T10:07:00Z"}]}
    }))
    .unwrap();
    let pods = [pod("web-canary-a", json!([crashing])), evicted];
    let r = restarts(&pods, "web", Some(ts("2026-12-04T10:00:00Z")));
    assert_eq!(r.total, 4);
    let reasons: Vec<_> = r.recent.iter().map(|x| x.reason.as_str()).collect();
    assert_eq!(reasons, ["Error", "Evicted"]);
    assert_eq!(r.recent[1].exit_code, None);
}

#[test]
fn a_pod_being_deleted_is_stopped_on_purpose() {
    let mut p = pod(
        "web-canary-a",
        json!([container(
            "web",
            1,
            Some(("Error", 143, "2026-12-04T10:05:00Z"))
        )]),
    );
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(
        "2026-12-04T10:05:00Z",
    )));
    assert_eq!(restarts(&[p], "web", None), Default::default());
}

fn outcome(verdict: crate::api::Verdict, reason: &str) -> crate::analysis::AnalysisOutcome {
    use crate::api::AnalysisRecord;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    crate::analysis::AnalysisOutcome {
        record: AnalysisRecord {
            at: Time(ts("2026-12-04T10:06:00Z")),
            stage_index: 0,
            weight: 30,
            verdict,
            baseline_requests: Some(20.0),
            candidate_requests: Some(3.0),
            checks: Vec::new(),
            reason: Some(reason.into()),
            capacity: None,
        },
        recommendation: None,
        no_data: false,
        queries: Default::default(),
    }
}

fn killed() -> crate::analysis::Restarts {
    let pods = [pod(
        "web-canary-b",
        json!([container(
            "web",
            2,
            Some(("OOMKilled", 137, "2026-12-04T10:05:00Z"))
        )]),
    )];
    restarts(&pods, "web", Some(ts("2026-12-04T10:04:00Z")))
}

#[test]
fn a_kill_fails_the_analysis_even_with_too_few_requests_and_says_why() {
    use crate::analysis::judge_restarts;
    use crate::api::Verdict;
    // A killed candidate serves few requests: the interval was Inconclusive on its metrics.
    let judged = judge_restarts(
        outcome(Verdict::Inconclusive, "too few requests"),
        Ok(killed()),
        "web",
        true,
    );
    assert_eq!(judged.record.verdict, Verdict::Fail);
    assert_eq!(judged.record.reason.as_deref(), Some("failed: restarts"));
    let check = judged.record.checks.last().unwrap();
    assert_eq!(
        (check.name.as_str(), check.verdict),
        ("restarts", Verdict::Fail)
    );
    assert_eq!(check.candidate, Some(2.0));
    assert_eq!(
        check.reason.as_deref(),
        Some(
            "the candidate restarted 1 time(s) since the previous analysis: container web of \
             pod web-canary-b: OOMKilled (exit code 137) at 2026-12-04T10:05:00Z"
        )
    );
}

#[test]
fn restarts_are_only_recorded_when_switched_off_and_quiet_pods_pass() {
    use crate::analysis::{judge_restarts, Restarts};
    use crate::api::Verdict;
    let judged = judge_restarts(
        outcome(Verdict::Pass, "all passed"),
        Ok(killed()),
        "web",
        false,
    );
    assert_eq!(judged.record.verdict, Verdict::Pass);
    let check = judged.record.checks.last().unwrap();
    assert_eq!(
        (check.verdict, check.limit.as_str()),
        (Verdict::Pass, "recorded only")
    );
    assert!(check.reason.as_deref().unwrap().contains("OOMKilled"));

    let quiet = Restarts {
        total: 1,
        recent: Vec::new(),
    };
    let judged = judge_restarts(outcome(Verdict::Pass, "all passed"), Ok(quiet), "web", true);
    assert_eq!(judged.record.verdict, Verdict::Pass);
    assert_eq!(judged.record.checks.last().unwrap().candidate, Some(1.0));
}

#[test]
fn unreadable_pods_make_a_passing_analysis_inconclusive_never_a_pass() {
    use crate::analysis::judge_restarts;
    use crate::api::Verdict;
    let judged = judge_restarts(
        outcome(Verdict::Pass, "all passed"),
        Err("forbidden".into()),
        "web",
        true,
    );
    assert_eq!(judged.record.verdict, Verdict::Inconclusive);
    let failed = judge_restarts(
        outcome(Verdict::Fail, "failed: latency"),
        Err("x".into()),
        "web",
        true,
    );
    assert_eq!(failed.record.verdict, Verdict::Fail);
}
