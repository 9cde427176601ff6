//! The worker-count rule: a Falcon candidate's event loops per pod against the rendered
//! workers (`analysis::check_workers`).

use super::fixtures::{context, spec, FakeSource, Kind, Variant};
use crate::analysis::{
    analyse, check_workers, judge_workers, EventLoops, PrometheusError, WORKERS_CHECK,
};
use crate::api::{CheckResult, ConcurrencyExperimentSpec, Verdict};

/// A Falcon 2-worker candidate (the fixture's Puma 2×4 made async).
fn falcon_spec() -> ConcurrencyExperimentSpec {
    let mut s = spec(r#"[{metric: errorRate, max: "5%"}]"#);
    s.candidate = Some(serde_yaml::from_str("{server: falcon, workers: 2}").unwrap());
    s
}

/// Every check passes with 100 requests per variant; the candidate's pods run `max`/`min`
/// event loops (`None`: no probe series).
fn source(loops: Option<(f64, f64)>) -> FakeSource {
    FakeSource::new(move |kind, variant| match (kind, variant) {
        (Kind::Requests, _) => Ok(Some(100.0)),
        (Kind::EventLoopsMax, Variant::Candidate) => Ok(loops.map(|l| l.0)),
        (Kind::EventLoopsMin, Variant::Candidate) => Ok(loops.map(|l| l.1)),
        _ => Ok(Some(0.0)),
    })
}

async fn judged(
    spec: &ConcurrencyExperimentSpec,
    source: &FakeSource,
) -> crate::plan::AnalysisOutcome {
    let ctx = context(30);
    let outcome = analyse(source, spec, &ctx, &[], &Default::default()).await;
    check_workers(source, spec, &ctx, outcome).await
}

fn entry(outcome: &crate::plan::AnalysisOutcome) -> Option<&CheckResult> {
    outcome
        .record
        .checks
        .iter()
        .find(|c| c.name == WORKERS_CHECK)
}

#[tokio::test]
async fn a_falcon_rb_count_over_the_rendered_workers_fails_the_analysis_naming_it() {
    // `count Etc.nprocessors` on an 8-core node: 8 event loops in every pod, 2 rendered.
    let out = judged(&falcon_spec(), &source(Some((7.98, 7.9)))).await;
    assert_eq!(out.record.verdict, Verdict::Fail);
    assert_eq!(out.record.reason.as_deref(), Some("failed: workers"));
    let w = entry(&out).unwrap();
    assert_eq!((w.verdict, w.candidate), (Verdict::Fail, Some(7.98)));
    assert_eq!(w.limit, "2 per pod (rendered)");
    let why = w.reason.as_deref().unwrap();
    assert!(why.starts_with("7.9–8.0 event loops per pod, rendered 2 worker(s): a count in falcon.rb overrides WEB_CONCURRENCY"), "{why}");
    assert!(out.queries[WORKERS_CHECK].starts_with(
        "max(sum by (pod) (rate(ruby_event_loop_probe_seconds_total{namespace=\"shop\",pod=~\"^storefront-candidate-"
    ), "{}", out.queries[WORKERS_CHECK]);
}

#[tokio::test]
async fn as_many_loops_as_rendered_pass_and_a_fraction_from_a_worker_restart_is_no_mismatch() {
    for loops in [(2.0, 2.0), (2.6, 1.4), (1.3, 1.3)] {
        let out = judged(&falcon_spec(), &source(Some(loops))).await;
        let w = entry(&out).unwrap();
        assert_eq!(w.verdict, Verdict::Pass, "{loops:?}: {:?}", w.reason);
        assert_eq!(out.record.verdict, Verdict::Pass, "{loops:?}");
    }
    // A count of 1 in falcon.rb against 2 rendered: every pod runs one loop.
    let out = judged(&falcon_spec(), &source(Some((1.0, 1.0)))).await;
    let w = entry(&out).unwrap();
    assert_eq!(w.verdict, Verdict::Fail);
    assert!(w
        .reason
        .as_deref()
        .unwrap()
        .contains("fewer run than rendered"));
}

#[tokio::test]
async fn without_the_probe_series_the_count_is_only_noted_and_puma_is_not_asked() {
    let out = judged(&falcon_spec(), &source(None)).await;
    let w = entry(&out).unwrap();
    assert_eq!((w.verdict, w.candidate), (Verdict::Pass, None));
    assert!(w
        .reason
        .as_deref()
        .unwrap()
        .starts_with("not measured: no ruby_event_loop_probe_seconds_total"));
    assert_eq!(out.record.verdict, Verdict::Pass);

    let puma = spec(r#"[{metric: errorRate, max: "5%"}]"#);
    let s = source(Some((8.0, 8.0)));
    let out = judged(&puma, &s).await;
    assert!(entry(&out).is_none());
    assert!(!s.was_asked(Kind::EventLoopsMax, Variant::Candidate));
}

#[tokio::test]
async fn switched_off_it_records_and_a_failed_query_is_inconclusive() {
    let mut off = falcon_spec();
    off.analysis.fail_on_worker_mismatch = false;
    let out = judged(&off, &source(Some((8.0, 8.0)))).await;
    let w = entry(&out).unwrap();
    assert_eq!(
        (w.verdict, w.limit.as_str()),
        (Verdict::Pass, "recorded only")
    );
    assert_eq!(out.record.verdict, Verdict::Pass);

    let down = FakeSource::new(|kind, _| match kind {
        Kind::Requests => Ok(Some(100.0)),
        Kind::EventLoopsMax => Err(PrometheusError::Timeout(std::time::Duration::from_secs(5))),
        _ => Ok(Some(0.0)),
    });
    let out = judged(&falcon_spec(), &down).await;
    assert_eq!(entry(&out).unwrap().verdict, Verdict::Inconclusive);
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    assert_eq!(out.record.reason.as_deref(), Some("inconclusive: workers"));
}

#[test]
fn a_mismatch_fails_an_analysis_that_was_inconclusive_for_too_few_requests() {
    let base = crate::plan::AnalysisOutcome {
        record: crate::api::AnalysisRecord {
            at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            stage_index: 0,
            weight: 30,
            verdict: Verdict::Inconclusive,
            baseline_requests: Some(10.0),
            candidate_requests: Some(3.0),
            checks: Vec::new(),
            reason: Some("too few requests".into()),
            capacity: None,
        },
        recommendation: None,
        no_data: false,
        queries: Default::default(),
    };
    let loops = EventLoops { min: 4.0, max: 4.0 };
    let out = judge_workers(base.clone(), Ok(Some(loops)), Some(2), "probe", true);
    assert_eq!(out.record.verdict, Verdict::Fail);
    // Nothing rendered to compare with: recorded, never judged.
    let out = judge_workers(base, Ok(Some(loops)), None, "probe", true);
    assert_eq!(out.record.verdict, Verdict::Inconclusive);
    assert!(entry(&out)
        .unwrap()
        .reason
        .as_deref()
        .unwrap()
        .contains("no worker count was rendered"));
}

#[test]
fn a_check_may_not_be_named_workers() {
    let a = super::fixtures::analysis(r#"[{name: workers, metric: errorRate, max: "1%"}]"#);
    let e = crate::analysis::validate(&a).unwrap_err();
    assert_eq!(e.category(), "ReservedCheckName");
    assert!(
        e.to_string().contains("analysis.failOnWorkerMismatch"),
        "{e}"
    );
}
