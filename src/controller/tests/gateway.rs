//! The reconciler with the gatewayAPI router against the fake API server.

use serde_json::json;

use super::clock::route_changed_long_ago;
use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase};

#[tokio::test]
async fn gateway_router_saves_the_route_shifts_weights_and_restores_it() {
    let fake = gateway_objects(
        FakeApi::default()
            .with(EXP, gateway_experiment())
            .with(TARGET, target(6, 6)),
    );
    reconcile_stored(&fake).await.unwrap();
    let candidate_svc = format!("{SERVICES}/storefront-candidate");
    let baseline_svc = format!("{SERVICES}/storefront-baseline");
    assert_eq!(
        fake.lines(),
        [
            format!("GET {ROUTE}"),
            format!("GET {SERVICES}"),
            format!("GET {REPLICA_SETS}"),
            format!("PATCH {EXP}/status"),
            format!("PATCH {CANDIDATE}"),
            format!("PATCH {candidate_svc}"),
        ]
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let original = exp.status.unwrap().original.unwrap();
    assert_eq!(original.replicas, 6);
    assert_eq!(
        original.route_backend_refs.as_deref(),
        Some(r#"[[{"name":"storefront","port":80}]]"#)
    );

    // Candidate ready: both variant Services, then the route split 70/30.
    set_ready(&fake, CANDIDATE, 2);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let calls = fake.calls();
    let writes: Vec<String> = calls
        .iter()
        .filter(|c| c.method == "PATCH")
        .map(|c| c.line())
        .collect();
    assert_eq!(
        writes,
        [
            format!("PATCH {EXP}/status"),
            format!("PATCH {baseline_svc}"),
            format!("PATCH {candidate_svc}"),
            format!("PATCH {ROUTE}")
        ]
    );
    let baseline = calls
        .iter()
        .find(|c| c.line() == format!("PATCH {baseline_svc}"))
        .unwrap();
    assert_eq!(
        baseline.body["spec"]["selector"]["pod-template-hash"],
        json!("7d9f8b6c5d")
    );
    let route = calls
        .iter()
        .find(|c| c.line() == format!("PATCH {ROUTE}"))
        .unwrap();
    assert_eq!(
        route.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(route.body["metadata"]["resourceVersion"], json!("50"));
    assert_eq!(
        route.body["spec"]["rules"][0]["backendRefs"],
        json!([
            {"name": "storefront-baseline", "port": 80, "weight": 70},
            {"name": "storefront-candidate", "port": 80, "weight": 30},
        ])
    );
    // The target keeps all its pods: the route, not the replica count, splits traffic.
    assert!(!fake.lines().contains(&format!("PATCH {TARGET}")));

    // Abort: the route goes back first; the candidate and Services go once it has.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.abort = true;
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let restore = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {ROUTE}"))
        .unwrap();
    assert_eq!(
        restore.body["spec"]["rules"][0]["backendRefs"],
        json!([{"name": "storefront", "port": 80}])
    );
    assert!(!fake.lines().iter().any(|l| l.starts_with("DELETE")));
    // Restored, but the Gateway may still send to the candidate: its pods stay for
    // scaleDownDelay after the route change.
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(!fake.lines().iter().any(|l| l.starts_with("DELETE")));
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let message = exp.status.unwrap().message.unwrap_or_default();
    assert!(message.contains("scaleDownDelay"), "{message}");
    route_changed_long_ago(&fake);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let deletes: Vec<String> = fake
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("DELETE"))
        .collect();
    assert_eq!(
        deletes,
        [
            format!("DELETE {CANDIDATE}"),
            format!("DELETE {candidate_svc}"),
            format!("DELETE {baseline_svc}")
        ]
    );
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
}

#[tokio::test]
async fn a_target_rollout_mid_stage_puts_the_route_back_first_and_repins_nothing() {
    let fake = gateway_objects(
        FakeApi::default()
            .with(EXP, gateway_experiment())
            .with(TARGET, target(6, 6)),
    );
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    let candidate_svc = format!("{SERVICES}/storefront-candidate");
    let baseline_svc = format!("{SERVICES}/storefront-baseline");
    assert!(fake.get::<serde_json::Value>(&baseline_svc).is_some());

    // A person rolls out a new image: the baseline Service pins the old ReplicaSet's pods,
    // which the rollout is about to take away.
    let mut t: serde_json::Value = fake.get(TARGET).unwrap();
    t["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example/storefront:1.5");
    t["metadata"]["generation"] = json!(4);
    fake.put(TARGET, t);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let writes: Vec<String> = fake
        .lines()
        .into_iter()
        .filter(|l| !l.starts_with("GET"))
        .collect();
    assert_eq!(
        writes,
        [format!("PATCH {EXP}/status"), format!("PATCH {ROUTE}")],
        "traffic back on the user's Service first; the baseline Service is not re-pinned"
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let decision = exp.status.unwrap().decision.unwrap();
    assert_eq!(decision.reason, "TargetChanged");
    assert!(
        decision.message.contains("(image changed)"),
        "{}",
        decision.message
    );
    let route: serde_json::Value = fake.get(ROUTE).unwrap();
    assert_eq!(
        route["spec"]["rules"][0]["backendRefs"],
        json!([{"name": "storefront", "port": 80}])
    );

    // Then (scaleDownDelay later) the candidate and both Services go, each as observed.
    route_changed_long_ago(&fake);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let deletes: Vec<_> = fake
        .calls()
        .into_iter()
        .filter(|c| c.method == "DELETE")
        .collect();
    assert_eq!(
        deletes.iter().map(|c| c.line()).collect::<Vec<_>>(),
        [
            format!("DELETE {CANDIDATE}"),
            format!("DELETE {candidate_svc}"),
            format!("DELETE {baseline_svc}")
        ]
    );
    for d in &deletes {
        assert!(d.body["preconditions"]["uid"].is_string(), "{}", d.body);
    }
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
}

/// A Service created a moment ago has no EndpointSlice yet, and a Gateway answers 500 for a
/// backendRef it cannot resolve (Traefik: "endpointslices not found", 41 failed requests on
/// the real cluster): the route names a variant Service only once it has a ready endpoint.
#[tokio::test]
async fn the_route_waits_for_the_variant_services_endpoints() {
    let fake = gateway_objects(
        FakeApi::default()
            .with(EXP, gateway_experiment())
            .with(TARGET, target(6, 6)),
    );
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, CANDIDATE, 2);
    fake.without_endpoints
        .lock()
        .unwrap()
        .push("storefront-baseline".into());
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let lines = fake.lines();
    assert!(lines
        .iter()
        .any(|l| l.starts_with("GET /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices")));
    assert!(!lines.contains(&format!("PATCH {ROUTE}")), "{lines:?}");

    fake.without_endpoints.lock().unwrap().clear();
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.lines().contains(&format!("PATCH {ROUTE}")));
    // Once the route sends to both, a later stage lists no slices.
    let route: serde_json::Value = fake.get(ROUTE).unwrap();
    assert_eq!(
        route["spec"]["rules"][0]["backendRefs"][1]["weight"],
        json!(30)
    );
}
