//! `promotion: external` through the shell: the experiment holds with the patch, a GitOps tool
//! applies the committed manifest, and the experiment completes without ever writing the
//! target's template.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{json, Value};

use super::fixtures::*;
use super::promote::{fake_prometheus, let_an_hour_pass, reconcile_until, status_of};
use crate::api::{ConcurrencyExperiment, Phase, Promotion};
use crate::plan::AWAITING_EXTERNAL_PROMOTION;

/// Git's manifest of the target (the fixture's, 6 replicas) with the reported patch merged in
/// the way `kubectl apply` or Kustomize merges a strategic merge patch: env entries by name.
fn committed_manifest(patch: &str) -> Value {
    let patch: Value = serde_yaml::from_str(patch).unwrap();
    let entry = &patch["spec"]["template"]["spec"]["containers"][0];
    let mut manifest = serde_json::to_value(target(6, 6)).unwrap();
    let app = &mut manifest["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(app["name"], entry["name"]);
    let env = app["env"].as_array_mut().unwrap();
    for var in entry["env"].as_array().unwrap() {
        match env.iter_mut().find(|v| v["name"] == var["name"]) {
            Some(old) => *old = var.clone(),
            None => env.push(var.clone()),
        }
    }
    manifest
}

/// Argo CD or Flux syncing the commit: the whole manifest applied over the live object — a new
/// template and Git's `spec.replicas` — as a new generation the Deployment controller has not
/// rolled out yet.
fn gitops_sync(fake: &FakeApi, manifest: &Value) {
    let mut live: Value = fake.get(TARGET).unwrap();
    let generation = live["metadata"]["generation"].as_i64().unwrap_or(1);
    live["metadata"]["generation"] = json!(generation + 1);
    live["spec"] = manifest["spec"].clone();
    live["status"]["readyReplicas"] = json!(0);
    fake.put(TARGET, live);
}

#[tokio::test]
async fn git_completes_the_promotion_and_the_operator_never_writes_the_template() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    exp.spec.promotion = Promotion::External;
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    let held = |e: &ConcurrencyExperiment| {
        status_of(e).hold_reason.as_deref() == Some(AWAITING_EXTERNAL_PROMOTION)
    };
    reconcile_until(&fake, held).await;

    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = status_of(&exp);
    assert_eq!(status.phase, Phase::Paused);
    let patch = status.promotion_patch.clone().expect("the patch to commit");
    assert_eq!(
        patch.summary,
        "set RAILS_MAX_THREADS=4, PUMA_MAX_THREADS=4, PUMA_MIN_THREADS=4 on container web"
    );
    let notes: Vec<String> = fake
        .calls()
        .iter()
        .filter(|c| c.uri.starts_with(EVENTS) && c.body["reason"] == AWAITING_EXTERNAL_PROMOTION)
        .map(|c| c.body["note"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", fake.event_reasons());
    assert!(notes[0].contains(&patch.summary), "{}", notes[0]);
    assert!(
        notes[0].contains(&patch.strategic_merge_patch),
        "{}",
        notes[0]
    );

    // Nobody has merged yet: it waits, the candidate serving everything.
    for _ in 0..3 {
        let_an_hour_pass(&fake);
        reconcile_stored(&fake).await.unwrap();
    }
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert!(held(&exp), "{:?}", status_of(&exp).message);

    gitops_sync(&fake, &committed_manifest(&patch.strategic_merge_patch));
    reconcile_until(&fake, |e| status_of(e).phase.is_terminal()).await;

    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = status_of(&exp);
    assert_eq!(status.phase, Phase::Succeeded, "{:?}", status.message);
    assert_eq!(status.decision.unwrap().reason, "PromotedExternally");
    let calls = fake.calls();
    let template_writes: Vec<String> = calls
        .iter()
        .filter(|c| c.uri.split('?').next() == Some(TARGET) && c.method != "GET")
        .filter(|c| c.method != "PATCH" || !c.body["spec"]["template"].is_null())
        .map(|c| c.line())
        .collect();
    assert!(template_writes.is_empty(), "{template_writes:?}");
    let scaled = calls.iter().any(|c| c.line() == format!("PATCH {TARGET}"));
    assert!(scaled, "the target was scaled (to 0 at 100 %, and back)");
    let target: Deployment = fake.get(TARGET).unwrap();
    let spec = target.spec.unwrap();
    assert_eq!(spec.replicas, Some(6), "back at its size");
    let env = serde_json::to_value(&spec.template.spec.unwrap().containers[0].env).unwrap();
    assert!(env
        .as_array()
        .unwrap()
        .contains(&json!({"name": "RAILS_MAX_THREADS", "value": "4"})));
    assert!(
        fake.get::<Deployment>(CANDIDATE).is_none(),
        "candidate removed"
    );
    let reasons = fake.event_reasons();
    assert!(!reasons.iter().any(|r| r == "TargetChanged"), "{reasons:?}");
    assert!(reasons.ends_with(&["Promoting".to_string(), "Succeeded".to_string()]));
}
