//! What keeps a reconcile's cost independent of how many experiments exist: Deployment events
//! wake only the experiments concerned, and reads come from the caches.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::fixtures::*;
use crate::controller::index::ExperimentIndex;
use crate::controller::waking;

fn deployment(name: &str, owner: Option<&str>) -> Deployment {
    let mut d = target(3, 3);
    d.metadata.name = Some(name.into());
    if let Some(owner) = owner {
        d.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperiment",
            "name": owner, "uid": EXP_UID, "controller": true,
        }))
        .unwrap()]);
    }
    d
}

#[test]
fn a_deployment_wakes_its_owner_and_the_experiments_naming_it_and_nothing_else() {
    let index = Arc::new(ExperimentIndex::default());
    for i in 0..500 {
        let mut e = experiment();
        e.metadata.name = Some(format!("exp-{i}"));
        e.spec.target_ref.name = format!("app-{i}");
        index.apply(&Event::Apply(e));
    }
    let woken = |d: &Deployment| {
        waking(&index, d)
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(woken(&deployment("app-7", None)), ["exp-7"]);
    assert_eq!(
        woken(&deployment("app-7-candidate", Some("exp-7"))),
        ["exp-7"]
    );
    assert!(woken(&deployment("unrelated", None)).is_empty());
    // A Deployment owned by something else is not an experiment's candidate.
    let mut rs_owned = deployment("other", None);
    rs_owned.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "u", "controller": true,
    }))
    .unwrap()]);
    assert!(woken(&rs_owned).is_empty());
}

#[tokio::test]
async fn a_reconcile_reads_nothing_from_the_api_when_nothing_is_to_be_written() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    // Pending → stage 1: status and candidate written.
    reconcile_stored(&fake).await.unwrap();
    // The candidate never gets ready (e.g. unschedulable): later reconciles change nothing.
    reconcile_stored(&fake).await.unwrap();
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(fake.lines(), Vec::<String>::new());
}

#[tokio::test]
async fn before_the_deployment_cache_is_listed_nothing_is_decided() {
    use crate::api::ConcurrencyExperiment;
    use crate::controller::context::{Caches, Context, Settings};
    use kube::runtime::controller::Action as Requeue;
    use kube::runtime::reflector;
    // A running experiment right after an operator restart: its target exists, but the
    // Deployment watch has not delivered its first list yet.
    let mut exp = with_finalizer(experiment());
    exp.status = Some(crate::api::ConcurrencyExperimentStatus {
        phase: crate::api::Phase::Progressing,
        stage_index: Some(1),
        ..Default::default()
    });
    let fake = FakeApi::default()
        .with(EXP, &exp)
        .with(TARGET, target(4, 4));
    let (synced_ctx, server) = fake.context(std::slice::from_ref(&exp));
    let (unsynced, _writer) = reflector::store::<Deployment>();
    let caches = Caches {
        deployments: vec![unsynced],
        ..synced_ctx.caches.clone()
    };
    let ctx = Context::new(
        synced_ctx.client.clone(),
        fake.metrics.clone(),
        Settings::default(),
        caches,
    );
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let requeue = crate::controller::reconcile(Arc::new(stored), Arc::new(ctx))
        .await
        .unwrap();
    server.abort();
    assert_eq!(requeue, Requeue::requeue(std::time::Duration::from_secs(1)));
    // No status written, no rollback decided: the target only looked missing.
    assert_eq!(fake.lines(), Vec::<String>::new());
}
