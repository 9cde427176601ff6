//! A target with a HorizontalPodAutoscaler, against the fake API server: promoted around the
//! HPA, which is never written; at 100 % the candidate grows by the HPA's rule applied to its
//! pods' usage (metrics.k8s.io), read only then.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{json, Value};

use super::fixtures::*;
use super::promote::{fake_prometheus, let_an_hour_pass, reconcile_until, status_of};
use crate::api::{ConcurrencyExperiment, Phase};

const HPA: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/storefront";

/// The user's HPA on the target (CPU at 60 %, 2–10 pods).
fn user_hpa() -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "storefront", "namespace": NS, "uid": "hpa-uid", "resourceVersion": "7"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "storefront"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120}}
        }
    })
}

#[tokio::test]
async fn an_autoscaled_target_is_promoted_around_its_hpa_which_is_never_written() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    let fake = FakeApi::default()
        .with(EXP, exp)
        .with(TARGET, target(6, 6))
        .with(HPA, user_hpa());
    reconcile_until(&fake, |e| status_of(e).phase == Phase::Succeeded).await;
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::Succeeded, "{:?}", status.message);

    let calls = fake.calls();
    // The user's HPA is read from the cache only: never patched, never deleted.
    assert!(
        !calls.iter().any(|c| c.uri.split('?').next() == Some(HPA)),
        "{:?}",
        fake.lines()
    );
    assert_eq!(fake.get::<Value>(HPA).unwrap(), user_hpa());
    // Below 100 % the target kept its 6 pods; it was scaled only to hand over and back.
    let scales: Vec<Value> = calls
        .iter()
        .filter(|c| c.line() == format!("PATCH {TARGET}") && c.body["spec"]["replicas"].is_number())
        .map(|c| c.body["spec"]["replicas"].clone())
        .collect();
    assert_eq!(scales, vec![json!(0), json!(6)], "{:?}", fake.lines());
    let target: Deployment = fake.get(TARGET).unwrap();
    assert_eq!(target.spec.unwrap().replicas, Some(6));
}

const POD_METRICS: &str = "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods";

/// At 100 % the target is at 0 replicas, where its HPA does not act: the candidate's pods use
/// 450m of their 500m request (90 % against the HPA's 60 %), so by the HPA's rule its 6 pods
/// become ⌈1.5 × 6⌉ = 9, which the promotion then gives the target.
#[tokio::test]
async fn at_100_the_candidate_grows_by_the_hpa_s_rule_applied_to_its_pods() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    let mut t: Value = serde_json::to_value(target(6, 6)).unwrap();
    t["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "500m", "memory": "256Mi"}});
    let fake = FakeApi::default()
        .with(EXP, exp)
        .with(TARGET, t)
        .with(HPA, user_hpa());
    for i in 0..6 {
        fake.put(
            &format!("{POD_METRICS}/storefront-candidate-{i}"),
            json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                   "metadata": {"name": format!("storefront-candidate-{i}"), "namespace": NS},
                   "timestamp": "2026-11-30T01:00:00Z", "window": "15s",
                   "containers": [{"name": "web", "usage": {"cpu": "450m", "memory": "120Mi"}}]}),
        );
    }
    let mut said = Vec::new();
    for _ in 0..30 {
        let before: ConcurrencyExperiment = fake.get(EXP).unwrap();
        let stage = before.status.and_then(|s| s.stage_index);
        fake.clear_calls();
        reconcile_stored(&fake).await.unwrap();
        said.extend(
            fake.calls()
                .iter()
                .filter(|c| c.uri.starts_with(EVENTS) && c.body["reason"] == "CandidateAutoscaled")
                .map(|c| c.body["note"].as_str().unwrap_or_default().to_string()),
        );
        let read = fake
            .lines()
            .iter()
            .any(|l| l.starts_with(&format!("GET {POD_METRICS}")));
        assert!(
            !read || stage == Some(2),
            "pod metrics read at stage {stage:?}: {:?}",
            fake.lines()
        );
        if stored_phase(&fake) == Phase::Succeeded {
            break;
        }
        let_an_hour_pass(&fake);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(stored_phase(&fake), Phase::Succeeded);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("cpu at 90 % of requests (target 60 %)")
            && said[0].contains("from 6 to 9"),
        "{said:?}"
    );
    let target: Deployment = fake.get(TARGET).unwrap();
    assert_eq!(
        target.spec.unwrap().replicas,
        Some(9),
        "promoted at the size the candidate grew to"
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert_eq!(exp.status.unwrap().original.unwrap().replicas, 9);
}
