//! The Deployment cache: whole for what experiments touch, metadata-only for the rest, and a
//! target cached metadata-only read once per change.

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::watcher::Event;
use kube::ResourceExt;
use serde_json::json;

use super::fixtures::*;
use crate::controller::deployments::{is_metadata_only, kept_whole, owning_experiment, slim};
use crate::controller::index::ExperimentIndex;

/// A Deployment as a real cluster returns it: managedFields, the last-applied annotation,
/// labels, a template with a few variables.
fn as_listed(name: &str) -> Deployment {
    let mut d = target(3, 3);
    d.metadata.name = Some(name.into());
    let mut raw = serde_json::to_value(&d).unwrap();
    raw["metadata"]["labels"] = json!({"app": name, "team": "checkout"});
    raw["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(serde_json::to_string(&raw["spec"]).unwrap());
    raw["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}},
    }]);
    serde_json::from_value(raw).unwrap()
}

fn size(d: &Deployment) -> usize {
    serde_json::to_vec(d).unwrap().len()
}

#[test]
fn a_deployment_no_experiment_touches_is_cached_metadata_only() {
    let full = as_listed("billing");
    let mut d = full.clone();
    slim(&mut d, false);
    assert!(is_metadata_only(&d) && d.status.is_none());
    assert_eq!(d.name_any(), "billing");
    assert_eq!(d.namespace(), full.namespace());
    assert_eq!(d.metadata.uid, full.metadata.uid);
    assert_eq!(d.metadata.resource_version, full.metadata.resource_version);
    assert!(d.metadata.labels.is_none() && d.metadata.annotations.is_none());
    assert!(d.metadata.managed_fields.is_none());
    assert!(
        size(&d) * 6 < size(&full),
        "{} bytes kept of {}",
        size(&d),
        size(&full)
    );
}

#[test]
fn a_target_is_kept_whole_without_managed_fields_or_last_applied() {
    let mut d = as_listed("storefront");
    let index = ExperimentIndex::default();
    assert!(!kept_whole(&index, &d), "no experiment names it yet");
    index.apply(&Event::Apply(experiment()));
    assert!(kept_whole(&index, &d));
    slim(&mut d, true);
    assert!(!is_metadata_only(&d) && d.status.is_some());
    assert!(d.metadata.managed_fields.is_none());
    let annotations = d.annotations();
    assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    assert!(annotations.contains_key("deployment.kubernetes.io/revision"));
    assert_eq!(d.labels()["team"], "checkout");
}

#[test]
fn only_an_experiments_own_deployment_is_kept_whole_by_ownership() {
    let owned = |api_version: &str, kind: &str, controller: bool| {
        let mut d = as_listed("storefront-candidate");
        d.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind, "name": "storefront-puma-4",
            "uid": "u", "controller": controller,
        }))
        .unwrap()]);
        d
    };
    let index = ExperimentIndex::default();
    let ours = owned("concurrency.dev/v1alpha1", "ConcurrencyExperiment", true);
    assert_eq!(owning_experiment(&ours), Some("storefront-puma-4"));
    assert!(kept_whole(&index, &ours));
    for other in [
        owned("example.com/v1", "ConcurrencyExperiment", true),
        owned("concurrency.dev/v1alpha1", "Rollout", true),
        owned("concurrency.dev/v1alpha1", "ConcurrencyExperiment", false),
    ] {
        assert_eq!(owning_experiment(&other), None);
        assert!(!kept_whole(&index, &other));
        // Still enough to see it is someone else's (`owner::not_ours`).
        let mut d = other.clone();
        slim(&mut d, false);
        assert_eq!(d.owner_references(), other.owner_references());
    }
}

fn target_gets(fake: &FakeApi) -> usize {
    fake.lines()
        .iter()
        .filter(|l| **l == format!("GET {TARGET}"))
        .count()
}

/// The target's last event came before its experiment's, so the cache holds it
/// metadata-only: the reconcile reads it once, acts as with a whole copy, and reads it again
/// only when it changed.
#[tokio::test]
async fn a_target_cached_metadata_only_is_read_once_per_change() {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    fake.metadata_only.lock().unwrap().push(TARGET.into());
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        fake.lines(),
        [
            format!("GET {TARGET}"),
            format!("PATCH {EXP}/status"),
            format!("PATCH {CANDIDATE}")
        ],
        "the candidate is rendered from the whole target"
    );
    let candidate: Deployment = fake.get(CANDIDATE).unwrap();
    let env = &candidate.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    assert!(env.iter().any(|e| e.name == "WEB_CONCURRENCY"));

    set_ready(&fake, CANDIDATE, 2);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(target_gets(&fake), 0, "unchanged: {:?}", fake.lines());
    assert!(fake.lines().contains(&format!("PATCH {TARGET}")));

    // The reconcile's own write changed it: the next reconcile reads it again, once.
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(target_gets(&fake), 1, "{:?}", fake.lines());
    assert_eq!(fake.full.len(), 1, "one copy per target");
}

/// The target was deleted after the cache saw it: the read finds nothing, as the watch will.
#[tokio::test]
async fn a_target_gone_before_its_read_is_missing() {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    fake.metadata_only.lock().unwrap().push(TARGET.into());
    let (ctx, server) = fake.context(&[experiment()]);
    fake.remove(TARGET);
    let read = ctx
        .caches
        .deployment(&ctx.client, NS, "storefront")
        .await
        .unwrap();
    server.abort();
    assert!(read.is_none());
    assert!(fake.full.is_empty());
}
