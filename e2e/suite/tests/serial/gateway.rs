//! The gatewayAPI router through a real data plane: Traefik (e2e/cluster/gateway: a host
//! process on the bridge IP with its kubernetesGateway provider, which also installs the
//! Gateway API CRDs it is built against) serves Gateway `shop-gateway` of class e2e-traefik,
//! and the load pod sends every request through it (Service gateway.gateway-system), never the
//! user's Service. At every stage the HTTPRoute's backendRef weights must equal the planned
//! weight, and the split the pods observe (their own request counters) over a window that lies
//! wholly inside the stage must be within E2E_SPLIT_TOLERANCE (15) points of the candidate's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e_tests::{
    alone, ensure, eventually, latency_check, phase_of, route_weights, run, split_within, status,
    Exp, Phase, Target, RATE,
};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use serde_json::json;

const STAGE_S: u64 = 25;

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn gateway() {
    let _alone = alone().await;
    run("gateway", async |s| {
        let tol: i64 = std::env::var("E2E_SPLIT_TOLERANCE").ok().and_then(|t| t.parse().ok()).unwrap_or(15);
        // The window ends before the stage does (stage length minus settling and polling slack).
        let win = (STAGE_S - 12).min(15);
        // Pods leave Traefik's endpoints before they stop (the promotion's and the target
        // rollout's replaced pods): no request may fail on any path here.
        s.deploy_target(&Target { drain_s: Some(10), ..Target::default() }).await?;
        let gw = s.route_through_gateway().await?;
        let routes = gw.routes.clone();
        s.start_load_to(420, RATE, &gw.url, "/").await?;
        let exp = Exp::new("routed", json!({"server": "puma", "workers": 2, "threads": 4}), latency_check())
            .extra(json!({"traffic": {"router": "gatewayAPI", "httpRoute": "storefront"}}));
        s.apply(&exp).await?;

        // Time-based: each weight is measured a window after it came into force, so this reads
        // the experiment and the route every second rather than waiting for a change.
        let (mut seen, mut measured) = (BTreeSet::new(), BTreeSet::new());
        let mut current: Option<(i32, Instant)> = None;
        let deadline = Instant::now() + Duration::from_secs(300);
        let e = loop {
            ensure!(Instant::now() < deadline, "gateway experiment: no final phase within 300 s");
            let e = s.cexp("routed").await?;
            if phase_of(&e).is_some_and(|p| p.is_terminal()) {
                break e;
            }
            let planned = status(&e).planned_weight;
            let weights = route_weights(&routes.get("storefront").await?);
            let in_force = |w: i32| weights.iter().any(|(n, x)| n == "storefront-candidate" && *x == w as i64);
            if phase_of(&e) == Some(Phase::Progressing) && !seen.contains(&planned) && in_force(planned) {
                s.log(format!("stage weight {planned}: route {weights:?}"));
                seen.insert(planned);
                current = Some((planned, Instant::now()));
            }
            // 5 s after the route changed (Traefik reloads, Prometheus scrapes), one window
            // later, and only while the weight is still in force.
            if let Some((w, since)) = current {
                if !measured.contains(&w) && in_force(w) && since.elapsed().as_secs() >= win + 5 {
                    let split = s.prom.observed_split(&s.ns, win).await?;
                    let shown = split.map(|p| format!("{p}%")).unwrap_or_else(|| "-".into());
                    s.log(format!(
                        "stage weight {w}: observed split through the gateway {shown} candidate (last {win} s)"
                    ));
                    split_within(split, w as i64, tol, "the route's weight")?;
                    measured.insert(w);
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        ensure!(phase_of(&e) == Some(Phase::Succeeded), "gateway experiment ended {}", e2e_tests::summary(Some(&e)));
        for w in [30, 70, 100] {
            ensure!(seen.contains(&w), "never saw the route at candidate weight {w} (saw {seen:?})");
            ensure!(measured.contains(&w), "never measured the split at candidate weight {w} (measured {measured:?})");
        }
        let weights = route_weights(&routes.get("storefront").await?);
        ensure!(
            weights.first().is_some_and(|(n, _)| n == "storefront")
                && !weights.iter().any(|(n, _)| n.contains("candidate")),
            "route not restored to the user's Service: {weights:?}"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(threads == "4", "target runs {threads} threads, not the candidate's 4");
        let svcs: Api<Service> = Api::namespaced(s.client.clone(), &s.ns);
        eventually(60, "variant Services gone", async || {
            Ok(svcs.list(&ListParams::default()).await?.items.len() == 1)
        })
        .await?;
        target_rolled_out_mid_stage(s, &routes).await?;
        let load = s.stop_load_and_count().await?;
        s.log(format!("load through the gateway: {} answered, {} failed", load.answered, load.failed()));
        ensure!(load.failed() == 0, "{} requests failed: {load:?}", load.failed());
        s.no_rbac_denials().await
    })
    .await;
}

/// Item 5 of issue 10: the target rolled out by a person while a stage is in force through the
/// route. The baseline Service pins the target's ReplicaSet (`pod-template-hash`), whose pods
/// the rollout replaces: the experiment rolls back (`TargetChanged`) and puts the route back
/// on the user's Service first, so the baseline's share never lands on a Service without
/// endpoints (the caller asserts that no request failed).
async fn target_rolled_out_mid_stage(
    s: &e2e_tests::Scenario,
    routes: &Api<kube::api::DynamicObject>,
) -> anyhow::Result<()> {
    let exp = Exp::new(
        "rolled",
        json!({"server": "puma", "workers": 2, "threads": 3}),
        latency_check(),
    )
    .extra(json!({"traffic": {"router": "gatewayAPI", "httpRoute": "storefront"}}));
    s.apply(&exp).await?;
    eventually(120, "the first stage in force on the route", async || {
        let w = route_weights(&routes.get("storefront").await?);
        Ok(w.iter()
            .any(|(n, x)| n == "storefront-candidate" && *x == 30))
    })
    .await?;
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"e2e/release": "2"}}}}});
    s.deploys
        .patch(
            "storefront",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    let e = s.wait_phase("rolled", 120, Phase::RolledBack).await?;
    ensure!(
        e2e_tests::decision_of(&e) == "Rollback/TargetChanged",
        "decision {}",
        e2e_tests::decision_of(&e)
    );
    let weights = route_weights(&routes.get("storefront").await?);
    ensure!(
        weights.len() == 1 && weights[0].0 == "storefront",
        "route not back on the user's Service: {weights:?}"
    );
    s.log(format!(
        "target rolled out mid-stage: rolled back, route {weights:?}"
    ));
    s.rollout("storefront", 120).await
}
