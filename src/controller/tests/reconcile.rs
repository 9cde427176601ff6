//! The reconciler against a fake API server: the exact calls, their order and their bodies.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::controller::Action as Requeue;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase, ANNOTATION_ABORT, ANNOTATION_RETRY};
use crate::controller::reconcile::reconcile;

/// The finalizer is taken just before the first write to the user's target, not at creation:
/// until then the experiment has only made its own objects (they go with it by owner
/// reference) and a deletion needs no restore.
#[tokio::test]
async fn the_finalizer_is_taken_just_before_the_first_write_to_the_target() {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    // Status and the candidate at once (no reconcile spent on the finalizer alone).
    assert_eq!(
        fake.lines(),
        [format!("PATCH {EXP}/status"), format!("PATCH {CANDIDATE}")]
    );
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert_eq!(stored.metadata.finalizers, None);

    // The candidate is ready: the target shrinks, and the finalizer comes first. The status
    // write is guarded by the resourceVersion the finalizer patch returned: no conflict, no
    // read again.
    set_ready(&fake, CANDIDATE, 2);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        fake.lines(),
        [
            format!("PATCH {EXP}"),
            format!("PATCH {EXP}/status"),
            format!("PATCH {TARGET}"),
        ]
    );
    let calls = fake.calls();
    assert_eq!(
        calls[0].content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["concurrency.dev/restore-baseline"]},
        ])
    );
    assert_eq!(calls[2].body, json!({"spec": {"replicas": 4}}));
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert_eq!(
        stored.metadata.finalizers.unwrap(),
        ["concurrency.dev/restore-baseline"]
    );
    // Held from then on: no second patch.
    set_ready(&fake, TARGET, 4);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        !fake.lines().contains(&format!("PATCH {EXP}")),
        "{:?}",
        fake.lines()
    );
}

/// Deleted between the decision and the finalizer (the API server adds no finalizer to an
/// object being deleted), or gone altogether: nothing is written, least of all the target.
#[tokio::test]
async fn an_experiment_deleted_before_its_finalizer_is_taken_never_writes_the_target() {
    for gone in [false, true] {
        let fake = FakeApi::default()
            .with(EXP, experiment())
            .with(TARGET, target(6, 6));
        reconcile_stored(&fake).await.unwrap();
        set_ready(&fake, CANDIDATE, 2);
        // The copy the reconcile sees is from before the deletion.
        let before: ConcurrencyExperiment = fake.get(EXP).unwrap();
        let mut deleted = before.clone();
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        if gone {
            fake.remove(EXP);
        } else {
            fake.put(EXP, deleted);
        }
        fake.clear_calls();
        let (ctx, server) = fake.context(std::slice::from_ref(&before));
        let requeue = reconcile(Arc::new(before), ctx).await;
        server.abort();
        assert_eq!(
            requeue.unwrap(),
            Requeue::requeue(std::time::Duration::from_millis(500))
        );
        assert_eq!(fake.lines(), [format!("PATCH {EXP}")], "gone: {gone}");
        assert_eq!(fake.get::<Deployment>(TARGET).unwrap(), target(6, 6));
        if !gone {
            let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
            assert_eq!(stored.metadata.finalizers, None);
        }
    }
}

/// A copy from before our own finalizer patch (the cache lags; a Deployment event woke the
/// experiment): the patch's `test` fails with a 422, which is a look-again, not an error.
#[tokio::test]
async fn a_stale_copys_finalizer_patch_is_retried_not_failed() {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    // The candidate is ready: the next step shrinks the target, so it takes the finalizer —
    // which the stored experiment already has, the copy reconciled does not.
    set_ready(&fake, CANDIDATE, 2);
    let stale: ConcurrencyExperiment = fake.get(EXP).unwrap();
    fake.put(EXP, with_finalizer(stale.clone()));
    fake.clear_calls();
    let (ctx, server) = fake.context(std::slice::from_ref(&stale));
    let requeue = reconcile(Arc::new(stale), ctx).await;
    server.abort();
    assert_eq!(
        requeue.unwrap(),
        Requeue::requeue(std::time::Duration::from_millis(500))
    );
    // Nothing acted on from the stale copy.
    assert_eq!(fake.lines(), [format!("PATCH {EXP}")]);
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert_eq!(
        stored.metadata.finalizers.unwrap(),
        ["concurrency.dev/restore-baseline"]
    );
}

#[tokio::test]
async fn pending_experiment_applies_the_candidate_after_recording_status() {
    // Target and candidate come from the watch cache: no GET, only the writes.
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        fake.lines(),
        [format!("PATCH {EXP}/status"), format!("PATCH {CANDIDATE}"),]
    );
    let calls = fake.calls();
    let apply = calls
        .iter()
        .find(|c| c.line() == format!("PATCH {CANDIDATE}"))
        .unwrap();
    assert_eq!(
        apply.query(),
        ["fieldManager=concurrency-operator", "force=true"]
    );
    assert_eq!(
        apply.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        apply.body["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperiment",
            "name": "storefront-puma-4", "uid": EXP_UID,
            "controller": true, "blockOwnerDeletion": true,
        }])
    );
    // Stage 1 of 30% on 6 pods: 2 candidate pods running puma 2×4.
    assert_eq!(apply.body["spec"]["replicas"], json!(2));
    let env = &apply.body["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "RAILS_MAX_THREADS", "value": "4"})),
        "{env}"
    );
    // The target is the user's: untouched until the candidate is ready.
    assert!(!fake.lines().contains(&format!("PATCH {TARGET}")));
    assert_eq!(fake.event_reasons(), ["Started"]);

    let status = &calls
        .iter()
        .find(|c| c.line() == format!("PATCH {EXP}/status"))
        .unwrap();
    assert_eq!(
        status.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(status.body["metadata"]["resourceVersion"], json!("100"));
    let s = &status.body["status"];
    assert_eq!(s["phase"], json!("Progressing"));
    assert_eq!(s["stage"], json!("1/3"));
    assert_eq!(s["plannedWeight"], json!(30));
    let promoted = crate::workload::promoted_fingerprint(
        &target(6, 6),
        experiment().spec.single_candidate(),
        Some("web"),
    );
    assert_eq!(
        s["original"],
        json!({"replicas": 6, "templateHash": crate::controller::observe::observations::template_hash(&target(6, 6)),
               "promotedTemplateHash": promoted})
    );
    assert_eq!(s["observedGeneration"], json!(1));
}

#[tokio::test]
async fn a_rollback_restores_the_target_before_deleting_the_candidate() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    // Into stage 1: candidate applied and ready, target shrunk to 4 and ready.
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    assert!(
        fake.lines().contains(&format!("PATCH {TARGET}")),
        "{:?}",
        fake.lines()
    );
    assert_eq!(
        fake.get::<Deployment>(TARGET)
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(4)
    );
    set_ready(&fake, TARGET, 4);
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Progressing);

    // The user aborts.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata.annotations = Some([(ANNOTATION_ABORT.to_string(), "true".to_string())].into());
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::RollingBack);
    let target_patch = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {TARGET}"))
        .unwrap();
    assert_eq!(
        target_patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(target_patch.body, json!({"spec": {"replicas": 6}}));
    // Capacity first: the candidate stays until the baseline is ready at full size.
    assert!(
        !fake.lines().iter().any(|l| l.starts_with("DELETE")),
        "{:?}",
        fake.lines()
    );

    set_ready(&fake, TARGET, 6);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let delete = fake
        .calls()
        .into_iter()
        .find(|c| c.method == "DELETE")
        .unwrap();
    assert_eq!(delete.line(), format!("DELETE {CANDIDATE}"));
    assert_eq!(delete.body["propagationPolicy"], json!("Background"));
    assert!(fake.get::<Deployment>(CANDIDATE).is_none());

    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    assert!(fake.event_reasons().contains(&"RolledBack".to_string()));
    let metrics = fake.metrics.encode();
    assert!(
        metrics.contains("concurrency_rollbacks_total{reason=\"Aborted\"} 1\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_status_conflict_from_a_spec_edit_is_retried_on_a_fresh_read() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    // Someone edits the experiment after the controller read it: same status, new version.
    let mut edited = exp.clone();
    edited.metadata.resource_version = Some("101".into());
    fake.put(EXP, edited);
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    reconcile(Arc::new(exp), ctx).await.unwrap();
    server.abort();
    let lines = fake.lines();
    assert_eq!(
        lines[0..3],
        [
            format!("PATCH {EXP}/status"),
            format!("GET {EXP}"),
            format!("PATCH {EXP}/status")
        ]
    );
    let retried = &fake
        .calls()
        .into_iter()
        .filter(|c| c.line() == format!("PATCH {EXP}/status"))
        .nth(1)
        .unwrap();
    assert_eq!(retried.body["metadata"]["resourceVersion"], json!("101"));
    assert_eq!(stored_phase(&fake), Phase::Progressing);
    assert!(lines.contains(&format!("PATCH {CANDIDATE}")));
}

#[tokio::test]
async fn a_decision_from_a_stale_status_is_dropped_not_acted_on() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let mut moved = exp.clone();
    moved.metadata.resource_version = Some("101".into());
    moved.status = Some(crate::api::ConcurrencyExperimentStatus {
        phase: Phase::Invalid,
        ..Default::default()
    });
    fake.put(EXP, moved);
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    let requeue = reconcile(Arc::new(exp), ctx).await.unwrap();
    server.abort();
    assert_eq!(
        requeue,
        Requeue::requeue(std::time::Duration::from_millis(500))
    );
    assert!(
        !fake.lines().contains(&format!("PATCH {CANDIDATE}")),
        "{:?}",
        fake.lines()
    );
    assert!(fake.event_reasons().is_empty());
}

#[tokio::test]
async fn a_second_experiment_on_the_same_target_is_invalid_and_touches_nothing() {
    let first = with_finalizer(experiment());
    let mut second: ConcurrencyExperiment = serde_json::from_value({
        let mut v: Value = serde_json::to_value(&first).unwrap();
        v["metadata"]["name"] = json!("storefront-falcon");
        v["metadata"]["uid"] = json!("5a1e0c2e-0000-4000-8000-000000000009");
        v["metadata"]["creationTimestamp"] = json!("2026-11-30T01:30:00Z");
        v
    })
    .unwrap();
    second.metadata.resource_version = Some("7".into());
    let path = EXP.replace("storefront-puma-4", "storefront-falcon");
    let fake = FakeApi::default()
        .with(&path, &second)
        .with(TARGET, target(6, 6));
    let (ctx, server) = fake.context(&[first, second.clone()]);
    reconcile(Arc::new(second), ctx).await.unwrap();
    server.abort();
    let stored: ConcurrencyExperiment = fake.get(&path).unwrap();
    let status = stored.status.unwrap();
    assert_eq!(status.phase, Phase::Invalid);
    assert!(status
        .message
        .unwrap()
        .contains("storefront-puma-4 already targets"));
    assert!(fake
        .lines()
        .iter()
        .all(|l| !l.contains("deployments/storefront-candidate") || l.starts_with("GET")));
    assert_eq!(fake.event_reasons(), ["Invalid"]);
}

#[tokio::test]
async fn an_experiment_already_gone_is_not_an_error() {
    // A second reconcile queued for an experiment whose finalizer was just released.
    let mut exp = with_finalizer(experiment());
    exp.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    exp.status = Some(crate::api::ConcurrencyExperimentStatus {
        phase: Phase::RolledBack,
        ..Default::default()
    });
    let fake = FakeApi::default().with(TARGET, target(6, 6));
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    let requeue = reconcile(Arc::new(exp), ctx).await.unwrap();
    server.abort();
    assert_eq!(requeue, Requeue::await_change());
    assert_eq!(fake.lines().last().unwrap(), &format!("PATCH {EXP}/status"));
    assert!(fake.event_reasons().is_empty());
}

#[tokio::test]
async fn a_candidate_that_never_gets_ready_is_explained_and_rolled_back_at_the_deadline() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6))
        .with(
            &format!("{PODS}/storefront-candidate-7c9f-x1y2z"),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "storefront-candidate-7c9f-x1y2z", "namespace": NS},
                "status": {"containerStatuses": [{
                    "name": "web", "ready": false, "restartCount": 5, "image": "i", "imageID": "",
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                }]},
            }),
        );
    reconcile_stored(&fake).await.unwrap();
    // A ready candidate costs no pod list.
    set_ready(&fake, CANDIDATE, 2);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        !fake.lines().contains(&format!("GET {PODS}")),
        "{:?}",
        fake.lines()
    );
    set_ready(&fake, CANDIDATE, 0);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    // Not ready but within the deadline: waiting costs no pod list either (at scale, a
    // thousand waiting experiments would list pods on every look).
    assert!(
        !fake.lines().contains(&format!("GET {PODS}")),
        "{:?}",
        fake.lines()
    );
    assert_eq!(stored_phase(&fake), Phase::Progressing);

    // The stage was entered longer ago than the default 10m deadline.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.as_mut().unwrap();
    let entered = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(11 * 60);
    status.stage_entered_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        entered,
    ));
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    // Past the deadline: its pods are listed by the candidate's own selector, for the reason.
    let list = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("GET {PODS}"))
        .expect("pods listed");
    assert!(
        list.query().iter().any(|q| q.starts_with("labelSelector=")
            && q.contains("concurrency.dev%2Fvariant%3Dcandidate")),
        "{:?}",
        list.query()
    );
    assert!(list.query().contains(&"limit=100".to_string()));
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let decision = exp.status.unwrap().decision.unwrap();
    assert_eq!(decision.reason, "ProgressDeadlineExceeded");
    assert!(
        decision.message.contains(
            "container web waiting: CrashLoopBackOff (last terminated: Error, exit code 1)"
        ),
        "{}",
        decision.message
    );
    assert!(fake
        .event_reasons()
        .contains(&"ProgressDeadlineExceeded".to_string()));
}

#[tokio::test]
async fn the_retry_annotation_restarts_a_rolled_back_experiment_and_is_removed() {
    let mut exp = with_finalizer(experiment());
    exp.metadata.annotations = Some(
        [
            (ANNOTATION_RETRY.to_string(), "true".to_string()),
            ("team".to_string(), "shop".to_string()),
        ]
        .into(),
    );
    exp.status = Some(crate::api::ConcurrencyExperimentStatus {
        phase: Phase::RolledBack,
        original: Some(crate::api::OriginalState {
            replicas: 4,
            ..Default::default()
        }),
        ..Default::default()
    });
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.clone().unwrap();
    assert_eq!(status.phase, Phase::Progressing);
    assert_eq!(status.original.unwrap().replicas, 6, "recorded anew");
    assert_eq!(exp.annotations().get(ANNOTATION_RETRY), None);
    assert_eq!(
        exp.annotations().get("team").map(String::as_str),
        Some("shop")
    );
    assert_eq!(fake.event_reasons(), ["Retried", "Started"]);
    let writes: Vec<String> = fake
        .lines()
        .into_iter()
        .filter(|l| !l.starts_with("GET"))
        .collect();
    assert_eq!(
        writes,
        [
            format!("PATCH {EXP}/status"),
            format!("PATCH {CANDIDATE}"),
            format!("PATCH {EXP}")
        ]
    );
    let removal = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {EXP}"))
        .unwrap();
    assert_eq!(
        removal.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        removal.body,
        json!({"metadata": {"annotations": {ANNOTATION_RETRY: null}}})
    );
}
