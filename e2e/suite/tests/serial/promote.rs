//! The happy path and the rollbacks the checks decide.

use e2e_tests::{
    alone, condition_true, ensure, latency_check, name_of, run, status, Exp, Progress, Target, RATE,
};
use serde_json::json;

/// Puma 2×6 → 2×4 through 30/70/100, the observed split within 15 points of the effective
/// weight at every stage, promoted.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn promote() {
    let _alone = alone().await;
    run("promote", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(240, RATE).await?;
        s.apply(&Exp::new(
            "threads",
            json!({"server": "puma", "workers": 2, "threads": 4}),
            latency_check(),
        ))
        .await?;
        s.wait_cexp("threads", 30, "experiment picked up", |e| {
            e.status.is_some()
        })
        .await?;
        let progress = Progress {
            split_tolerance: Some(15),
            ..Progress::default()
        };
        let e = s.progress("threads", progress).await?;
        ensure!(
            condition_true(&e, "Succeeded"),
            "no Succeeded condition: {:?}",
            status(&e).conditions
        );
        let d = status(&e).decision;
        ensure!(
            d.as_ref().is_some_and(|d| name_of(&d.action) == "Promote"),
            "decision is not Promote: {d:?}"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "target runs {threads} threads, not the candidate's 4"
        );
        let workers = s.env("storefront", "WEB_CONCURRENCY").await?;
        ensure!(
            workers == "2",
            "target runs {workers} workers, not the candidate's 2"
        );
        let r = s.replicas("storefront").await?;
        ensure!(r == e2e_tests::REPLICAS, "target replicas changed to {r}");
        s.gone("storefront-candidate", 60).await?;
        s.expect_event("threads", "Promoting").await?;
        s.expect_event("threads", "Succeeded").await?;
        // Every stage was analysed, in order (status keeps the newest analyses only: a note).
        let stages: std::collections::BTreeSet<i32> =
            status(&e).analyses.iter().map(|a| a.stage_index).collect();
        if stages.into_iter().collect::<Vec<_>>() != [0, 1, 2] {
            let kept: Vec<i32> = status(&e).analyses.iter().map(|a| a.stage_index).collect();
            s.log(format!("note: analyses kept in status, by stage: {kept:?}"));
        }
        let rec = status(&e).recommendation.map(|r| r.message);
        s.log(format!("recommendation: {rec:?}"));
        s.no_rbac_denials().await
    })
    .await;
}
