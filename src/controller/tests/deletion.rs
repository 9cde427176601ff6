//! Deleting an experiment against the fake API server: the baseline restored before the
//! finalizer goes, and a terminating namespace letting go at once.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::fixtures::*;
use crate::api::ConcurrencyExperiment;

fn finalizers(fake: &FakeApi) -> Vec<String> {
    fake.get::<ConcurrencyExperiment>(EXP)
        .unwrap()
        .metadata
        .finalizers
        .unwrap_or_default()
}

fn mark_deleted(fake: &FakeApi) {
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    fake.put(EXP, exp);
}

#[tokio::test]
async fn deleting_mid_flight_restores_the_baseline_then_releases_the_finalizer() {
    let fake = at_stage_one_with_the_baseline_short().await;

    mark_deleted(&fake);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.lines().contains(&format!("PATCH {TARGET}")));
    assert_eq!(
        finalizers(&fake).len(),
        1,
        "held while the baseline is short"
    );

    set_ready(&fake, TARGET, 6);
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.get::<Deployment>(CANDIDATE).is_none());
    reconcile_stored(&fake).await.unwrap();
    let last = fake
        .calls()
        .into_iter()
        .rev()
        .find(|c| c.method == "PATCH")
        .unwrap();
    assert_eq!(last.line(), format!("PATCH {EXP}"));
    assert_eq!(
        last.body,
        json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": "concurrency.dev/restore-baseline"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ])
    );
    assert_eq!(finalizers(&fake), Vec::<String>::new());
}

/// Waiting at stage 1 for a candidate that never gets ready (unschedulable, the cluster out
/// of room): the experiment has written nothing of the user's and holds no finalizer, so
/// `kubectl delete` removes it at once and the candidate goes by its owner reference. Here it
/// is seen deleting because someone else's finalizer holds it: the operator writes nothing.
#[tokio::test]
async fn an_experiment_that_never_wrote_the_users_objects_is_deleted_without_the_operator() {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.get::<Deployment>(CANDIDATE).is_some());
    assert_eq!(finalizers(&fake), Vec::<String>::new());

    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata.finalizers = Some(vec!["example.com/someone-else".into()]);
    fake.put(EXP, exp);
    mark_deleted(&fake);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(fake.lines(), Vec::<String>::new());
    assert_eq!(finalizers(&fake), ["example.com/someone-else"]);
}

#[tokio::test]
async fn in_a_terminating_namespace_the_finalizer_goes_at_once_with_nothing_else_written() {
    let fake = at_stage_one_with_the_baseline_short().await;
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
    ns["metadata"]["deletionTimestamp"] = json!(jiff::Timestamp::now().to_string());
    fake.put(NAMESPACE, ns);

    mark_deleted(&fake);
    // As the apiserver does: setting the deletion timestamp bumps the generation.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata.generation = Some(exp.metadata.generation.unwrap_or(1) + 1);
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    // The namespace controller deletes the target and the candidate with the namespace: no
    // scale, no status, no Event — only the finalizer's removal.
    assert_eq!(
        fake.lines(),
        [format!("GET {NAMESPACE}"), format!("PATCH {EXP}")]
    );
    assert!(fake.event_reasons().is_empty());
    assert_eq!(finalizers(&fake), Vec::<String>::new());
    assert!(fake.get::<Deployment>(CANDIDATE).is_some());
}

/// Deleted while the baseline is short, and still short past `spec.progressDeadline` (10m)
/// after the deletion: the finalizer goes, but the candidate's ready pods do not go with it —
/// it is let go of (owner reference removed, annotated) and keeps serving.
#[tokio::test]
async fn a_deletion_past_its_deadline_never_takes_the_serving_candidate_with_it() {
    let fake = at_stage_one_with_the_baseline_short().await;
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let eleven_minutes_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(660);
    exp.metadata.deletion_timestamp = Some(Time(eleven_minutes_ago));
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();

    assert_eq!(
        finalizers(&fake),
        Vec::<String>::new(),
        "{:#?}",
        fake.lines()
    );
    assert!(
        !fake.lines().contains(&format!("DELETE {CANDIDATE}")),
        "{:#?}",
        fake.lines()
    );
    let candidate: Deployment = fake.get(CANDIDATE).expect("the candidate is still there");
    assert_eq!(
        candidate.metadata.owner_references.unwrap_or_default(),
        Vec::new(),
        "still owned: garbage collection would remove it"
    );
    assert_eq!(
        candidate
            .metadata
            .annotations
            .unwrap_or_default()
            .get("concurrency.dev/kept-from")
            .map(String::as_str),
        Some("storefront-puma-4")
    );
    let patch = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {CANDIDATE}"))
        .unwrap();
    assert_eq!(patch.body[0]["op"], "test", "{}", patch.body);
    assert_eq!(patch.body[0]["path"], "/metadata/uid");
}
