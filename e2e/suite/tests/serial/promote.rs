//! The happy path, a manual promotion, an experiment deleted mid-flight.

use std::time::{Duration, Instant};

use e2e_tests::{
    alone, condition_true, ensure, held, latency_check, name_of, phase_of, report_matches_status,
    run, status, summary, wait_for, within, Dashboard, Exp, Phase, Progress, Target, RATE,
};
use kube::ResourceExt;
use serde_json::json;

fn puma_2x4() -> serde_json::Value {
    json!({"server": "puma", "workers": 2, "threads": 4})
}

/// Puma 2×6 → 2×4 through 30/70/100, the observed split within 15 points of the effective
/// weight at every stage, promoted.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn promote() {
    let _alone = alone().await;
    run("promote", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(240, RATE).await?;
        // The dashboard, started before the experiment exists: its row must come and change
        // through the dashboard's watch.
        let dashboard = Dashboard::start().await?;
        s.apply(&Exp::new(
            "threads",
            json!({"server": "puma", "workers": 2, "threads": 4}),
            latency_check(),
        ))
        .await?;
        let first = dashboard
            .wait_phase(&s.ns, "threads", &["Pending", "Progressing"], 60)
            .await?;
        s.log(format!(
            "dashboard: {} shows threads {first}",
            dashboard.url
        ));
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
        // The dashboard followed it to the end, and makes its report on demand.
        dashboard
            .wait_phase(&s.ns, "threads", &["Succeeded"], 30)
            .await?;
        let page = dashboard.report(&s.ns, "threads").await?;
        ensure!(
            page.contains(r#"<figure data-chart="latency">"#),
            "the dashboard's report has no latency chart"
        );
        // The report, made after the end from Prometheus, agrees with status.
        let html = report_matches_status(&s.ns, &e).await?;
        s.log(format!(
            "report: {} KiB, stages from {}",
            html.len() / 1024,
            if html.contains("from the operator&#39;s gauge") {
                "the operator's gauge"
            } else {
                "status"
            }
        ));
        s.no_rbac_denials().await
    })
    .await;
}

/// Manual promotion: the experiment holds after its last stage until a person approves; the
/// approve annotation is one-shot — the operator acts on it and removes it (a merge patch its
/// RBAC must allow on the real apiserver).
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn approval() {
    let _alone = alone().await;
    run("approval", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(240, RATE).await?;
        let exp =
            Exp::new("gated", puma_2x4(), latency_check()).extra(json!({"promotion": "manual"}));
        s.apply(&exp).await?;
        let e = s
            .wait_cexp("gated", 200, "holding for approval", |e| {
                held(e, Phase::Paused, "AwaitingApproval")
            })
            .await?;
        s.log(format!(
            "holding: {}",
            status(&e).message.unwrap_or_default()
        ));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let e = s.cexp("gated").await?;
        ensure!(
            phase_of(&e) == Some(Phase::Paused),
            "did not keep holding without approval: {}",
            summary(Some(&e))
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "6",
            "target changed before approval ({threads} threads)"
        );
        ensure!(status(&e).planned_weight == 100, "not at the last stage");
        s.annotate("gated", "concurrency.dev/approve", "true")
            .await?;
        s.wait_phase("gated", 90, Phase::Succeeded).await?;
        let e = s
            .wait_cexp(
                "gated",
                30,
                "approve annotation removed by the operator",
                |e| !e.annotations().contains_key("concurrency.dev/approve"),
            )
            .await?;
        let reason = status(&e)
            .decision
            .map(|d| name_of(&d.reason))
            .unwrap_or_default();
        ensure!(
            reason == "Approved",
            "decision reason {reason}, not Approved"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "target runs {threads} threads, not the candidate's 4"
        );
        s.expect_event_once("gated", "Promoting").await?;
        s.no_rbac_denials().await
    })
    .await;
}

/// Deleted mid-flight, with the candidate serving: the finalizer restores the baseline.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn deleted() {
    let _alone = alone().await;
    run("deleted", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(120, RATE).await?;
        s.apply(&Exp::new("gone", puma_2x4(), latency_check()))
            .await?;
        within(90, "candidate ready in stage 1", async {
            s.wait_cexp("gone", 90, "stage 1", |e| status(e).stage_index == Some(0))
                .await?;
            wait_for(
                s.deploys.clone(),
                "storefront-candidate",
                90,
                "candidate ready",
                |d| {
                    d.status
                        .as_ref()
                        .and_then(|st| st.ready_replicas)
                        .unwrap_or(0)
                        >= 1
                },
            )
            .await
        })
        .await?;
        let t = Instant::now();
        s.delete_cexp("gone", 60).await?;
        s.assert_baseline_restored().await?;
        s.rollout("storefront", 60).await?;
        s.log(format!(
            "deleted mid-flight: baseline restored in {} s",
            t.elapsed().as_secs()
        ));
        Ok(())
    })
    .await;
}
