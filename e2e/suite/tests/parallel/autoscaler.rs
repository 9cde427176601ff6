//! A HorizontalPodAutoscaler on the target, with a real metrics pipeline (metrics-server,
//! `e2e/cluster/metrics`): the load rises during the experiment, the HPA scales the target up,
//! the experiment follows it without a tug of war, and the HPA is exactly as before afterwards.

use e2e_tests::{decision_of, ensure, run, status, tolerant_check, wait_for, Exp, Target};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

/// 10m CPU requested per pod, 2 ms of CPU per request: 30 req/s over 3 pods is ~200 % of the
/// request per pod — under the 300 % target, so the HPA holds at its minimum of 3 — and 90 req/s
/// is ~600 %, which makes it scale to its maximum of 6.
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
            .stage_s(40),
        )
        .await?;
        s.wait_cexp("scaled", 90, "stage 1's split in force", |e| {
            status(e).stage_started_at.is_some()
        })
        .await?;
        // Three times the load, for the rest of the experiment: the HPA scales the target up.
        s.start_load(240, 90).await?;
        wait_for(
            s.deploys.clone(),
            "storefront",
            120,
            "the HPA scaling the target up",
            |d| {
                d.spec
                    .as_ref()
                    .and_then(|sp| sp.replicas)
                    .is_some_and(|r| r > 3)
            },
        )
        .await?;
        s.log("the HPA scaled the target up mid-experiment");
        let copy = wait_for(
            hpas.clone(),
            "storefront-candidate",
            300,
            "the candidate's HPA copy at 100 %",
            |_| true,
        )
        .await?;
        let spec = copy.spec.clone().unwrap_or_default();
        ensure!(
            spec.scale_target_ref.name == "storefront-candidate",
            "copy scales {}",
            spec.scale_target_ref.name
        );
        ensure!(
            (spec.min_replicas, spec.max_replicas) == (Some(3), 6),
            "copy bounds {:?}",
            (spec.min_replicas, spec.max_replicas)
        );
        ensure!(
            copy.owner_references()
                .iter()
                .any(|o| o.kind == "ConcurrencyExperiment" && o.name == "scaled"),
            "the copy is not owned by the experiment"
        );
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
        // No tug of war: the HPA's changes are followed, each said once.
        let scaled = s.count_events("scaled", "TargetScaled").await?;
        ensure!((1..=4).contains(&scaled), "{scaled} TargetScaled Events");
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
        // The user's HPA is exactly as before; the copy is gone; the target is the HPA's again.
        let after = hpas.get("storefront").await?;
        ensure!(
            after.spec == created.spec,
            "the user's HPA changed: {:?}",
            after.spec
        );
        ensure!(
            hpas.get_opt("storefront-candidate").await?.is_none(),
            "the copy is left"
        );
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
