//! The load balancer's arrival stamp as AWS ALB gives it (issue 27): no `X-Request-Start`,
//! only `X-Amzn-Trace-Id` with the arrival second. Every queue time then carries the arrival's
//! fraction of a second, and the operator says so before traffic moves and in every analysis.

use std::time::Duration;

use e2e_tests::{ensure, run, status, Exp, Phase, Target, RATE};
use serde_json::json;

const CLOCK: &str = "queue time looks like a one-second clock";

/// gvl-sim behind an "ALB": the pre-flight warns (`QueueTimeCoarse`, and in
/// `status.preflight`) and the experiment starts; its first analyses' `queueTime` reason says
/// the same with the measured shares. Deleted after that: what it would decide is not the point.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn alb_queue_clock() {
    run("alb_queue_clock", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_alb_load(150, RATE).await?;
        // 100 queue times or more scraped (5 s) before the pre-flight reads the last 5 minutes.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let checks = json!([
            {"metric": "queueTime", "quantile": 0.9, "maxIncrease": "50%"},
            {"metric": "errorRate", "max": "5%"},
        ]);
        let candidate = json!({"server": "puma", "workers": 2, "threads": 4});
        s.apply(&Exp::new("alb", candidate, checks).stage_s(60))
            .await?;
        s.expect_event("alb", "QueueTimeCoarse").await?;
        let warned = s
            .events("alb")
            .await?
            .into_iter()
            .find(|e| e.reason == "QueueTimeCoarse")
            .map(|e| (e.type_, e.note))
            .unwrap_or_default();
        s.log(format!("event: {} {}", warned.0, warned.1));
        ensure!(
            warned.0 == "Warning" && warned.1.contains(CLOCK) && warned.1.contains("backlog"),
            "the QueueTimeCoarse Event does not say what it is: {warned:?}"
        );
        let e = s.cexp("alb").await?;
        let st = status(&e);
        let pre = st.preflight.clone();
        ensure!(
            pre.as_ref().is_some_and(|p| p.passed_at.is_some()
                && p.message.as_deref().is_some_and(|m| m.contains(CLOCK))),
            "status.preflight does not keep the warning: {pre:?}"
        );
        // An analysis of stage 1: the queueTime check's reason names the clock.
        let seen = std::sync::Mutex::new(None);
        e2e_tests::eventually(
            90,
            "an analysis whose queueTime names the clock",
            async || {
                let e = s.cexp("alb").await?;
                let st = status(&e);
                ensure!(
                    st.phase == Phase::Progressing,
                    "the experiment left Progressing: {} {:?}",
                    st.phase.as_str(),
                    st.message
                );
                let reason = st
                    .analyses
                    .last()
                    .and_then(|a| a.checks.iter().find(|c| c.name == "queueTime"))
                    .and_then(|c| c.reason.clone());
                let named = reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("one-second clock ("));
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = reason;
                Ok(named)
            },
        )
        .await?;
        let seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
        s.log(format!("queueTime: {}", seen.unwrap_or_default()));
        s.delete_cexp("alb", 90).await?;
        s.stop_load().await;
        s.assert_baseline_restored().await
    })
    .await;
}
