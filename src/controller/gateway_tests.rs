//! The reconciler with the gatewayAPI router against the fake API server.

use serde_json::json;

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
