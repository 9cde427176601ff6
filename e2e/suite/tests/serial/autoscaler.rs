//! A HorizontalPodAutoscaler on the target, with a real metrics pipeline (metrics-server,
//! `e2e/cluster/metrics`): the load rises during the experiment, the HPA scales the target up,
//! the experiment follows it without a tug of war, and the HPA is exactly as before afterwards.

use e2e_tests::{alone, decision_of, ensure, run, status, tolerant_check, wait_for, Exp, Target};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Api;
use serde_json::{json, Value};

/// 10m CPU requested per pod, 2 ms of CPU per request: 30 req/s over 3 pods is ~200 % of the
/// request per pod — under the 300 % target, so the HPA holds at its minimum of 3 — and
/// 120 req/s is ~600 % over the 4 pods with the candidate's, which makes it scale to its
/// maximum of 6. Serial: its CPU load would slow the scenarios running beside it (a relative
/// latency check failed next to it), and theirs would blur its CPU numbers.
fn user_hpa() -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "storefront"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "storefront"},
            "minReplicas": 3, "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 300}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}
        }
    })
}

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run), with e2e/cluster/metrics started"]
async fn hpa() {
    let _alone = alone().await;
    run("hpa", async |s| {
        s.deploy_target(&Target::default()).await?;
        let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(s.client.clone(), &s.ns);
        let created: HorizontalPodAutoscaler = s.create(user_hpa()).await?;
        s.start_load(120, 30).await?;
        // The HPA works before the experiment starts: it has read the pods' CPU.
        wait_for(
            hpas.clone(),
            "storefront",
            120,
            "the HPA reading CPU",
            |h| {
                h.status
                    .as_ref()
                    .and_then(|st| st.current_metrics.as_ref())
                    .is_some_and(|m| !m.is_empty())
            },
        )
        .await?;
        s.apply(
            &Exp::new(
                "scaled",
                json!({"server": "puma", "workers": 2, "threads": 4}),
                tolerant_check(),
            )
            .stage_s(60),
        )
        .await?;
        s.wait_cexp("scaled", 90, "stage 1's split in force", |e| {
            status(e).stage_started_at.is_some()
        })
        .await?;
        // Four times the load, for the rest of the experiment: the HPA scales the target up.
        s.start_load(300, 120).await?;
        wait_for(
            s.deploys.clone(),
            "storefront",
            180,
            "the HPA scaling the target up",
            |d| {
                d.spec
                    .as_ref()
                    .and_then(|sp| sp.replicas)
                    .is_some_and(|r| r > 3)
            },
        )
        .await?;
        let e = s.cexp("scaled").await?;
        ensure!(
            !e2e_tests::phase_of(&e).is_some_and(|p| p.is_terminal()),
            "the HPA scaled the target only after the experiment ended"
        );
        s.log("the HPA scaled the target up mid-experiment");
        let (e, min_ready) = s
            .min_ready_while(s.progress("scaled", Default::default()))
            .await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}",
            decision_of(&e)
        );
        ensure!(
            min_ready >= 3,
            "only {min_ready} pods ready behind the Service at one point"
        );
        // No tug of war: the HPA's changes are followed, each said once (one Event per
        // distinct change: the target's replicas go at most 3 → 6 and back, a tug of war
        // would say it dozens of times).
        let scaled = s.count_events("scaled", "TargetScaled").await?;
        ensure!((1..=8).contains(&scaled), "{scaled} TargetScaled Events");
        let notes: Vec<String> = s
            .events("scaled")
            .await?
            .into_iter()
            .filter(|e| e.reason == "TargetScaled")
            .map(|e| e.note)
            .collect();
        ensure!(
            notes
                .iter()
                .all(|n| n.contains("HorizontalPodAutoscaler storefront")),
            "{notes:?}"
        );
        // The user's HPA is exactly as before, and nothing else scales the target.
        let after = hpas.get("storefront").await?;
        ensure!(
            after.spec == created.spec,
            "the user's HPA changed: {:?}",
            after.spec
        );
        let others = hpas.list(&Default::default()).await?.items.len();
        ensure!(others == 1, "{others} HPAs in the namespace");
        let r = s.replicas("storefront").await?;
        ensure!(
            (3..=6).contains(&r),
            "target at {r} replicas after promotion"
        );
        ensure!(
            s.env("storefront", "RAILS_MAX_THREADS").await? == "4",
            "target does not run the candidate's threads"
        );
        s.rollout("storefront", 120).await?;
        s.gone("storefront-candidate", 60).await
    })
    .await;
}
