//! Prometheus stopped mid-experiment (e2e/cluster/prometheus): too many inconclusive analyses
//! roll back, or with `onInconclusive: pause` hold until a person approves.

use std::time::Duration;

use e2e_tests::{
    alone, cluster_script, ensure, eventually, held, latency_check, name_of, phase_of, run, status,
    summary, Exp, Phase, Progress, Scenario, Target, RATE,
};
use kube::ResourceExt;
use serde_json::json;

async fn prometheus(action: &str) -> anyhow::Result<()> {
    cluster_script("prometheus", &[action]).await
}

/// The target under load and an experiment with inconclusiveLimit 2 (then `on_inconclusive`);
/// once it is in its first stage, Prometheus is stopped. The caller starts it again.
async fn blind_experiment(
    s: &Scenario,
    name: &str,
    load_s: u32,
    on_inconclusive: &str,
) -> anyhow::Result<()> {
    s.deploy_target(&Target::default()).await?;
    s.start_load(load_s, RATE).await?;
    let exp = Exp::new(
        name,
        json!({"server": "puma", "workers": 2, "threads": 4}),
        latency_check(),
    )
    .inconclusive_limit(2)
    .on_inconclusive(on_inconclusive);
    s.apply(&exp).await?;
    s.wait_cexp(name, 90, "first stage reached", |e| {
        status(e).stage_index == Some(0)
    })
    .await?;
    prometheus("stop").await
}

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn prometheus_down() {
    let _alone = alone().await;
    run("prometheus_down", async |s| {
        let blind = async {
            blind_experiment(s, "blind", 180, "rollback").await?;
            s.progress("blind", Progress::default()).await
        }
        .await;
        // Prometheus comes back whatever happens, or later scenarios would fail for the wrong
        // reason.
        prometheus("start").await?;
        let e = blind?;
        ensure!(
            phase_of(&e) == Some(Phase::RolledBack),
            "{} with Prometheus down",
            summary(Some(&e))
        );
        let reason = status(&e)
            .decision
            .map(|d| name_of(&d.reason))
            .unwrap_or_default();
        ensure!(
            reason == "InconclusiveLimit",
            "decision reason {reason}, not InconclusiveLimit"
        );
        ensure!(
            status(&e).stage_index == Some(0),
            "advanced past stage 1 without data"
        );
        s.expect_event("blind", "AnalysisInconclusive").await?;
        s.assert_baseline_restored().await
    })
    .await;
}

/// Prometheus down with `onInconclusive: pause`: the experiment holds at its stage (never
/// promotes, never rolls back by itself), keeps holding after Prometheus is back — a pause
/// needs a person — and one approve annotation lifts it; then it runs to promotion.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn prometheus_down_pause() {
    let _alone = alone().await;
    run("prometheus_down_pause", async |s| {
        let paused = async {
            blind_experiment(s, "held", 300, "pause").await?;
            s.wait_cexp("held", 120, "paused on inconclusive analyses", |e| {
                held(e, Phase::Paused, "InconclusiveLimit")
            })
            .await
        }
        .await;
        prometheus("start").await?;
        let e = paused?;
        s.log(format!(
            "paused: {}",
            status(&e).message.unwrap_or_default()
        ));
        tokio::time::sleep(Duration::from_secs(25)).await;
        let e = s.cexp("held").await?;
        ensure!(
            phase_of(&e) == Some(Phase::Paused),
            "the pause lifted itself: {}",
            summary(Some(&e))
        );
        ensure!(status(&e).stage_index == Some(0), "advanced while paused");
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "6",
            "target changed while paused ({threads} threads)"
        );
        s.annotate("held", "concurrency.dev/approve", "true")
            .await?;
        eventually(30, "hold lifted (a HoldLifted Event)", async || {
            s.has_event("held", "HoldLifted").await
        })
        .await?;
        s.wait_cexp(
            "held",
            30,
            "approve annotation removed by the operator",
            |e| !e.annotations().contains_key("concurrency.dev/approve"),
        )
        .await?;
        let e = s.progress("held", Progress::default()).await?;
        ensure!(
            phase_of(&e) == Some(Phase::Succeeded),
            "did not run to Succeeded after the approval: {}",
            summary(Some(&e))
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "target runs {threads} threads, not the candidate's 4"
        );
        Ok(())
    })
    .await;
}
