//! The operator itself goes away: killed (one replica), or the leader of two killed.

use e2e_tests::{
    alone, ensure, install_operator, latency_check, phase_of, run, status, summary, wait_for, Exp,
    Phase, Progress, Scenario, Target, RATE, REPLICAS,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use serde_json::json;

/// Fails unless the namespace holds exactly one Deployment (the target).
async fn no_duplicates(s: &Scenario) -> anyhow::Result<()> {
    let names: Vec<String> = s
        .deploys
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|d: &Deployment| d.metadata.name.clone())
        .collect();
    ensure!(names.len() == 1, "duplicate Deployments: {names:?}");
    Ok(())
}

/// The operator is killed twice: mid-stage 2, and while promoting (the candidate starts
/// slowly, so the target's rollout to the candidate config takes a while). Each time it
/// resumes from status: no stage lost, no duplicate objects, every decision's Event once.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn operator_killed() {
    let _alone = alone().await;
    run("operator_killed", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(300, RATE).await?;
        let candidate = json!({"server": "puma", "workers": 2, "threads": 4,
                               "env": [{"name": "SLOW_START_S", "value": "4"}]});
        s.apply(&Exp::new("restart", candidate, latency_check()))
            .await?;
        s.wait_cexp("restart", 150, "second stage reached", |e| {
            status(e).stage_index == Some(1)
        })
        .await?;
        s.kill_operator("mid-stage 2").await?;
        let e = s.cexp("restart").await?;
        ensure!(
            status(&e).stage_index >= Some(1),
            "stage lost: {}",
            summary(Some(&e))
        );
        s.operator_rolled_out(120).await?;
        let e = s.wait_phase("restart", 200, Phase::Promoting).await?;
        s.log(format!(
            "promoting: {}",
            status(&e).message.unwrap_or_default()
        ));
        s.kill_operator("during promotion").await?;
        let e = s.cexp("restart").await?;
        ensure!(
            matches!(phase_of(&e), Some(Phase::Promoting | Phase::Succeeded)),
            "{} after the kill",
            summary(Some(&e))
        );
        s.operator_rolled_out(120).await?;
        let e = s.progress("restart", Progress::default()).await?;
        ensure!(
            phase_of(&e) == Some(Phase::Succeeded),
            "did not resume to Succeeded: {}",
            summary(Some(&e))
        );
        s.gone("storefront-candidate", 60).await?;
        no_duplicates(s).await?;
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "target runs {threads} threads, not the candidate's 4"
        );
        let r = s.replicas("storefront").await?;
        ensure!(r == REPLICAS, "target replicas changed to {r}");
        s.rollout("storefront", 60).await?;
        for reason in ["Promoting", "Succeeded"] {
            let n = s.count_events("restart", reason).await?;
            ensure!(n == 1, "{n} {reason} Events (expected exactly 1)");
        }
        Ok(())
    })
    .await;
}

/// Two replicas with leader election: the leader killed at stage 2, the other takes the
/// Lease over and finishes the experiment, once.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn leader_failover() {
    let _alone = alone().await;
    run("leader_failover", async |s| {
        let two = async {
            install_operator(&["--set", "replicaCount=2"]).await?;
            failover(s).await
        }
        .await;
        // Back to one replica whatever happened, for the scenarios after this one.
        install_operator(&["--set", "replicaCount=1"]).await?;
        two
    })
    .await;
}

async fn failover(s: &Scenario) -> anyhow::Result<()> {
    let op: kube::Api<Deployment> =
        kube::Api::namespaced(s.client.clone(), &e2e_tests::operator_ns());
    wait_for(
        op,
        &e2e_tests::operator_name(),
        60,
        "two ready operator pods",
        |d| d.status.as_ref().and_then(|st| st.ready_replicas) == Some(2),
    )
    .await?;
    s.deploy_target(&Target::default()).await?;
    s.start_load(240, RATE).await?;
    s.apply(&Exp::new(
        "failover",
        json!({"server": "puma", "workers": 2, "threads": 4}),
        latency_check(),
    ))
    .await?;
    s.wait_cexp("failover", 120, "second stage reached", |e| {
        status(e).stage_index == Some(1)
    })
    .await?;
    let holder = s
        .lease_holder()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no lease holder"))?;
    // The identity is "<pod name>-<random suffix>".
    let pod = holder
        .rsplit_once('-')
        .map(|(pod, _)| pod)
        .unwrap_or(&holder)
        .to_string();
    s.log(format!("killing the leader {pod} (identity {holder})"));
    let t = std::time::Instant::now();
    s.kill_pod(&pod).await?;
    let leases: kube::Api<Lease> =
        kube::Api::namespaced(s.client.clone(), &e2e_tests::operator_ns());
    let old = holder.clone();
    let lease = wait_for(
        leases,
        &e2e_tests::operator_name(),
        60,
        "a new lease holder",
        move |l| {
            l.spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty() && h != old)
        },
    )
    .await?;
    let holder2 = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    s.log(format!(
        "leadership handed to {holder2} in {} s (lease 15 s)",
        t.elapsed().as_secs()
    ));
    let e = s.progress("failover", Progress::default()).await?;
    ensure!(
        phase_of(&e) == Some(Phase::Succeeded),
        "did not continue to Succeeded: {}",
        summary(Some(&e))
    );
    no_duplicates(s).await?;
    let n = s.count_events("failover", "Succeeded").await?;
    ensure!(n == 1, "{n} Succeeded Events (expected exactly 1)");
    Ok(())
}
