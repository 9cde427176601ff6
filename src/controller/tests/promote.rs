//! A whole experiment through every stage to promotion, against the fake API server and a
//! fake Prometheus that reports the same healthy numbers for both variants.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::fixtures::*;
use kube::ResourceExt;

use crate::api::{ConcurrencyExperiment, Phase, ANNOTATION_APPROVE};

/// Answers every instant query with one sample of `value` — but the capacity gate's CPU and
/// I/O seconds per request with the demo app's 2 ms and 60 ms, so a Puma 2×4 candidate can
/// carry the stages; returns its base URL.
pub(super) async fn fake_prometheus(value: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&request);
                let line = line.lines().next().unwrap_or_default();
                let (cpu, io) = (
                    line.contains("ruby_running_seconds_total"),
                    line.contains("ruby_io_wait_seconds_total"),
                );
                let value = match (cpu, io) {
                    (true, false) => "0.002",
                    (false, true) => "0.06",
                    _ => value,
                };
                let body = json!({"status": "success", "data": {"resultType": "vector",
                    "result": [{"metric": {}, "value": [1796000000, value]}]}})
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}

/// What time and the Deployment controller would do between two reconciles: the current
/// stage's clock and the last analysis move an hour into the past, and every Deployment
/// becomes ready at its wanted size (rolled out).
pub(super) fn let_an_hour_pass(fake: &FakeApi) {
    let mut exp: Value = fake.get(EXP).unwrap();
    for field in ["stageStartedAt", "lastAnalysisAt"] {
        if let Some(at) = exp["status"][field].as_str() {
            let at: jiff::Timestamp = at.parse().unwrap();
            exp["status"][field] = json!(at - jiff::SignedDuration::from_hours(1));
        }
    }
    fake.put(EXP, exp);
    for path in [TARGET, CANDIDATE] {
        if let Some(d) = fake.get::<Deployment>(path) {
            set_ready(fake, path, d.spec.and_then(|s| s.replicas).unwrap_or(1));
        }
    }
}

#[tokio::test]
async fn passing_analyses_promote_the_candidate_into_the_target() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_until(&fake, |e| status_of(e).phase == Phase::Succeeded).await;
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::Succeeded, "{:?}", status.message);
    assert!(status
        .analyses
        .iter()
        .all(|a| a.verdict == crate::api::Verdict::Pass));

    let calls = fake.calls();
    let promote = calls
        .iter()
        .position(|c| {
            c.line() == format!("PATCH {TARGET}") && c.body["spec"]["template"].is_object()
        })
        .expect("the promotion patch");
    let body = &calls[promote].body;
    assert_eq!(
        calls[promote].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert!(
        body["metadata"]["resourceVersion"].is_string(),
        "guarded by resourceVersion"
    );
    let env = &body["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "RAILS_MAX_THREADS", "value": "4"})),
        "{env}"
    );
    let delete = calls
        .iter()
        .position(|c| c.line() == format!("DELETE {CANDIDATE}"))
        .expect("candidate removed");
    assert!(
        promote < delete,
        "the candidate goes only after the target runs its config"
    );

    let target: Deployment = fake.get(TARGET).unwrap();
    assert_eq!(
        target.spec.unwrap().replicas,
        Some(6),
        "back to its original size"
    );
    assert!(fake.get::<Deployment>(CANDIDATE).is_none());
    let metrics = fake.metrics.encode();
    assert!(
        metrics.contains("concurrency_promotions_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("concurrency_analyses_total{verdict=\"Pass\"}"),
        "{metrics}"
    );
    let reasons = fake.event_reasons();
    for reason in ["Started", "StageAdvanced", "Succeeded"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} in {reasons:?}"
        );
    }
}

/// Reconciles (an hour passing between each) until `done` holds for the stored experiment.
pub(super) async fn reconcile_until(fake: &FakeApi, done: impl Fn(&ConcurrencyExperiment) -> bool) {
    for _ in 0..30 {
        reconcile_stored(fake).await.unwrap();
        let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
        if done(&exp) {
            return;
        }
        let_an_hour_pass(fake);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "not reached: {:?}",
        fake.get::<Value>(EXP).unwrap()["status"]
    );
}

pub(super) fn status_of(exp: &ConcurrencyExperiment) -> crate::api::ConcurrencyExperimentStatus {
    exp.status.clone().unwrap_or_default()
}

#[tokio::test]
async fn the_approve_annotation_promotes_once_and_is_removed() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    exp.spec.promotion = crate::api::Promotion::Manual;
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_until(&fake, |e| {
        status_of(e).hold_reason.as_deref() == Some(crate::plan::AWAITING_APPROVAL)
    })
    .await;

    // `kubectl annotate cexp storefront-puma-4 concurrency.dev/approve=true`
    let mut stored: Value = fake.get(EXP).unwrap();
    stored["metadata"]["annotations"] = json!({ANNOTATION_APPROVE: "true", "team": "shop"});
    fake.put(EXP, stored);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();

    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = status_of(&exp);
    assert_eq!(status.phase, Phase::Promoting);
    assert!(status.approve_annotation_consumed);
    assert_eq!(exp.annotations().get(ANNOTATION_APPROVE), None);
    assert_eq!(
        exp.annotations().get("team").map(String::as_str),
        Some("shop")
    );
    // Status first, the removal last: a merge patch of just that key, as an Update under the
    // operator's field manager (no server-side apply ownership of the metadata).
    let writes: Vec<String> = fake
        .lines()
        .into_iter()
        .filter(|l| !l.starts_with("GET"))
        .collect();
    assert_eq!(writes.first(), Some(&format!("PATCH {EXP}/status")));
    assert_eq!(writes.last(), Some(&format!("PATCH {EXP}")));
    let calls = fake.calls();
    let removal = calls
        .iter()
        .find(|c| c.line() == format!("PATCH {EXP}"))
        .unwrap();
    assert_eq!(
        removal.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        removal.body,
        json!({"metadata": {"annotations": {ANNOTATION_APPROVE: null}}})
    );
    assert!(
        removal
            .query()
            .contains(&"fieldManager=concurrency-operator".to_string()),
        "{:?}",
        removal.query()
    );

    // The rest of the promotion neither removes anything again nor keeps the memory.
    reconcile_until(&fake, |e| status_of(e).phase == Phase::Succeeded).await;
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert!(!status_of(&exp).approve_annotation_consumed);
    let removals = fake
        .calls()
        .iter()
        .filter(|c| c.line() == format!("PATCH {EXP}"))
        .count();
    assert_eq!(removals, 1);
}

/// `spec.candidate` edited after the decision to promote: the target gets the judged config,
/// never the new one no stage judged.
#[tokio::test]
async fn an_edit_while_promoting_writes_the_judged_config() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_until(&fake, |e| status_of(e).phase == Phase::Promoting).await;
    let mut edited: ConcurrencyExperiment = fake.get(EXP).unwrap();
    if let Some(c) = edited.spec.candidate.as_mut() {
        c.threads = Some(3);
    }
    edited.metadata.generation = Some(edited.metadata.generation.unwrap_or(1) + 1);
    fake.put(EXP, &edited);
    reconcile_until(&fake, |e| status_of(e).phase == Phase::Succeeded).await;
    let written: Vec<String> = fake
        .calls()
        .iter()
        .filter(|c| c.line() == format!("PATCH {TARGET}") && c.body["spec"]["template"].is_object())
        .map(|c| c.body["spec"]["template"]["spec"]["containers"][0]["env"].to_string())
        .collect();
    assert!(!written.is_empty());
    for env in &written {
        assert!(
            env.contains(r#"{"name":"RAILS_MAX_THREADS","value":"4"}"#),
            "{env}"
        );
    }
    let status = status_of(&fake.get::<ConcurrencyExperiment>(EXP).unwrap());
    assert_eq!(
        status.message.as_deref(),
        Some("Promoted: Deployment storefront now runs puma 2×4.")
    );
    assert!(fake.event_reasons().iter().any(|r| r == "SpecChanged"));
}
