//! Ownership against the fake API server: objects by the operator's names that it did not
//! create are never patched or deleted, and its own are written and deleted only as the
//! objects (UIDs) it observed.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use serde_json::{json, Value};

use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase};
use crate::controller::act::Actor;
use crate::controller::observe::fetch::Fetched;
use crate::plan::Action;

/// A Deployment named like the candidate that a person made: our labels copied, no owner
/// reference to the experiment.
fn foreign_candidate() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "storefront-candidate", "namespace": NS, "uid": "theirs-0001",
            "resourceVersion": "300",
            "labels": {"app": "storefront", "concurrency.dev/experiment": "storefront-puma-4"},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "storefront-candidate"}},
            "template": {"metadata": {"labels": {"app": "storefront-candidate"}},
                         "spec": {"containers": [{"name": "web", "image": "their-image:1"}]}},
        },
    })
}

/// Calls other than reads that touched `path`.
fn writes_to(fake: &FakeApi, path: &str) -> Vec<String> {
    fake.lines()
        .into_iter()
        .filter(|l| !l.starts_with("GET") && l.ends_with(path))
        .collect()
}

#[tokio::test]
async fn a_foreign_candidate_makes_a_pending_experiment_invalid_and_is_never_touched() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6))
        .with(CANDIDATE, foreign_candidate());
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::Invalid);
    assert_eq!(
        status.message.as_deref(),
        Some(
            "The experiment cannot run: Deployment storefront-candidate exists and is not \
             managed by this experiment; rename or delete it."
        )
    );
    assert_eq!(fake.event_reasons(), ["Invalid"]);
    // Deleting the experiment releases it at once and still leaves their Deployment alone.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    fake.put(EXP, exp);
    reconcile_stored(&fake).await.unwrap();
    assert!(writes_to(&fake, CANDIDATE).is_empty(), "{:?}", fake.lines());
    assert!(writes_to(&fake, TARGET).is_empty(), "{:?}", fake.lines());
    assert_eq!(fake.get::<Value>(CANDIDATE).unwrap(), foreign_candidate());
    let finalizers = fake
        .get::<ConcurrencyExperiment>(EXP)
        .unwrap()
        .metadata
        .finalizers;
    assert_eq!(finalizers.unwrap_or_default(), Vec::<String>::new());
}

#[tokio::test]
async fn a_candidate_replaced_mid_flight_is_rolled_back_around_never_patched_or_deleted() {
    // Stage 1 in force: our candidate (2 pods), the target at 4.
    let fake = at_stage_one_with_the_baseline_short().await;
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Progressing);
    let ours: Deployment = fake.get(CANDIDATE).unwrap();
    assert!(ours.metadata.uid.is_some());

    // Someone deletes ours and creates their own by the same name.
    fake.put(CANDIDATE, foreign_candidate());
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::RollingBack);
    assert_eq!(status.decision.unwrap().reason, "NotOwned");
    let scale = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {TARGET}"))
        .expect("the baseline is restored");
    assert_eq!(scale.body, json!({"spec": {"replicas": 6}}));

    set_ready(&fake, TARGET, 6);
    for _ in 0..3 {
        reconcile_stored(&fake).await.unwrap();
    }
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    assert!(writes_to(&fake, CANDIDATE).is_empty(), "{:?}", fake.lines());
    assert_eq!(fake.get::<Value>(CANDIDATE).unwrap(), foreign_candidate());
}

/// The actions as the shell runs them on what it fetched, while the stored objects have moved on.
async fn act_on(
    fake: &FakeApi,
    fetched: &Fetched,
    actions: &[Action],
) -> crate::controller::error::Result<()> {
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    let result = Actor::new(&ctx, &exp, fetched, None)
        .unwrap()
        .execute(actions)
        .await;
    server.abort();
    result
}

#[tokio::test]
async fn a_candidate_replaced_between_read_and_write_is_neither_overwritten_nor_deleted() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    let ours: Deployment = fake.get(CANDIDATE).unwrap();
    let fetched = Fetched {
        target: fake.get(TARGET),
        candidate: Some(ours.clone()),
        ..Fetched::default()
    };
    // Re-applying our own carries the UID it was seen with; deleting it is conditional on it.
    fake.clear_calls();
    act_on(&fake, &fetched, &[Action::EnsureCandidate { replicas: 3 }])
        .await
        .unwrap();
    let apply = &fake.calls()[0];
    assert_eq!(apply.line(), format!("PATCH {CANDIDATE}"));
    assert_eq!(apply.body["metadata"]["uid"], json!(ours.metadata.uid));

    // Replaced after our read: the apply is refused (uid is immutable), the delete too (409).
    fake.put(CANDIDATE, foreign_candidate());
    let err = act_on(&fake, &fetched, &[Action::EnsureCandidate { replicas: 3 }])
        .await
        .unwrap_err();
    assert_eq!(err.category(), "ApiInvalid");
    fake.clear_calls();
    let err = act_on(&fake, &fetched, &[Action::RemoveCandidate])
        .await
        .unwrap_err();
    assert_eq!(err.category(), "ApiConflict");
    let delete = &fake.calls()[0];
    assert_eq!(delete.line(), format!("DELETE {CANDIDATE}"));
    assert_eq!(
        delete.body["preconditions"],
        json!({"uid": ours.metadata.uid})
    );
    assert_eq!(fake.get::<Value>(CANDIDATE).unwrap(), foreign_candidate());

    // Observed as someone else's: not even tried.
    let theirs = Fetched {
        candidate: fake.get(CANDIDATE),
        ..fetched.clone()
    };
    fake.clear_calls();
    let err = act_on(&fake, &theirs, &[Action::EnsureCandidate { replicas: 3 }])
        .await
        .unwrap_err();
    assert_eq!(err.category(), "NotOwned");
    assert_eq!(
        err.to_string(),
        "Deployment storefront-candidate exists and is not managed by this experiment; it is \
         left alone"
    );
    act_on(&fake, &theirs, &[Action::RemoveCandidate])
        .await
        .unwrap();
    assert!(fake.lines().is_empty(), "{:?}", fake.lines());
}

#[tokio::test]
async fn a_foreign_variant_service_makes_a_gateway_experiment_invalid() {
    let theirs = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "storefront-baseline", "namespace": NS, "uid": "theirs-svc"},
        "spec": {"selector": {"app": "storefront", "track": "stable"}, "ports": [{"port": 80}]},
    });
    let baseline_svc = format!("{SERVICES}/storefront-baseline");
    let fake = gateway_objects(
        FakeApi::default()
            .with(EXP, gateway_experiment())
            .with(TARGET, target(6, 6)),
    )
    .with(&baseline_svc, &theirs);
    reconcile_stored(&fake).await.unwrap();
    let status = fake
        .get::<ConcurrencyExperiment>(EXP)
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.phase, Phase::Invalid);
    assert!(status
        .message
        .unwrap()
        .contains("Service storefront-baseline exists and is not managed by this experiment"));
    assert!(writes_to(&fake, &baseline_svc).is_empty());
    assert!(writes_to(&fake, CANDIDATE).is_empty());
    assert!(writes_to(&fake, ROUTE).is_empty());
    assert_eq!(
        fake.get::<Service>(&baseline_svc).unwrap(),
        serde_json::from_value(theirs).unwrap()
    );
}
