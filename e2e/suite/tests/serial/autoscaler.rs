//! A HorizontalPodAutoscaler on the target, with a real metrics pipeline (metrics-server,
//! `e2e/cluster/metrics`): the load rises during the experiment, the HPA scales the target up,
//! the experiment follows it without a tug of war, and the HPA is exactly as before afterwards.

use e2e_tests::{
    alone, decision_of, ensure, run, status, tolerant_check, wait_for, ConcurrencyExperiment, Exp,
    Scenario, Target,
};
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

/// Follows experiment `name` to its end: promoted, with at least the HPA's minimum of 3 pods
/// ready behind the Service all along.
async fn promoted_with_3_ready(s: &Scenario, name: &str) -> anyhow::Result<ConcurrencyExperiment> {
    let (e, min_ready) = s
        .min_ready_while(s.progress(name, Default::default()))
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
    Ok(e)
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
        promoted_with_3_ready(s, "scaled").await?;
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

/// The last stage with the `replicas` router: the target is at 0, where its HPA does not act,
/// and the load quadruples. The operator applies the HPA's rule to the candidate's pods (their
/// usage from metrics.k8s.io): the candidate grows, and the promotion gives the target that
/// size. 30 req/s holds the HPA at 3 (~200 % of the request against 300 %); 120 req/s over the
/// candidate's 3 pods is ~800 %, which asks for ⌈2.7 × 3⌉ = 8, capped at the HPA's 6.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run), with e2e/cluster/metrics started"]
async fn hpa_last_stage() {
    let _alone = alone().await;
    run("hpa_last_stage", async |s| {
        // Counted to the last request: pods that drain at termination, as production's do
        // (gvl-sim exits at SIGTERM; the promotion removes six candidate pods at once).
        s.deploy_target(&Target {
            drain_s: Some(10),
            ..Target::default()
        })
        .await?;
        let _: HorizontalPodAutoscaler = s.create(user_hpa()).await?;
        s.start_load(300, 30).await?;
        s.apply(
            &Exp::new(
                "grows",
                json!({"server": "puma", "workers": 2, "threads": 4}),
                tolerant_check(),
            )
            .extra(json!({"stages": [
                {"weight": 30, "duration": "20s"},
                {"weight": 100, "duration": "100s"},
            ]})),
        )
        .await?;
        s.wait_cexp("grows", 150, "the candidate alone at 100 %", |e| {
            let st = status(e);
            st.stage_index == Some(1) && st.stage_started_at.is_some()
        })
        .await?;
        ensure!(
            s.replicas("storefront").await? == 0,
            "the target is not at 0 at 100 %"
        );
        let before = s.replicas("storefront-candidate").await?;
        s.start_load(240, 120).await?;
        s.log(format!(
            "at 100 % with {before} candidate pods: load 30 → 120 req/s"
        ));
        wait_for(
            s.deploys.clone(),
            "storefront-candidate",
            90,
            "the candidate growing by the HPA's rule",
            move |d| {
                d.spec
                    .as_ref()
                    .and_then(|sp| sp.replicas)
                    .is_some_and(|r| r > before)
            },
        )
        .await?;
        let notes: Vec<String> = s
            .events("grows")
            .await?
            .into_iter()
            .filter(|e| e.reason == "CandidateAutoscaled")
            .map(|e| e.note)
            .collect();
        s.log(format!("CandidateAutoscaled: {notes:?}"));
        ensure!(
            notes
                .iter()
                .any(|n| n.contains("HorizontalPodAutoscaler storefront") && n.contains("cpu at")),
            "{notes:?}"
        );
        let e = promoted_with_3_ready(s, "grows").await?;
        let grown = status(&e).original.map(|o| o.replicas).unwrap_or_default();
        ensure!(
            grown > before,
            "original.replicas {grown}, not above {before}"
        );
        let load = s.stop_load_and_count().await?;
        s.log(format!(
            "load: {} answered, {} failed; promoted at {grown} replicas",
            load.answered,
            load.failed()
        ));
        ensure!(
            load.failed() == 0,
            "{} requests failed: {load:?}",
            load.failed()
        );
        let r = s.replicas("storefront").await?;
        // The HPA, back in charge, may only have grown it since (its scale-down waits 60 s).
        ensure!(
            (grown..=6).contains(&r),
            "target at {r} replicas after promotion at {grown}"
        );
        s.gone("storefront-candidate", 60).await
    })
    .await;
}
