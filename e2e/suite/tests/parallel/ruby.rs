//! The real Ruby server in the cluster (issue 13): the reference app on Debian's Ruby 3.1 and
//! Puma 5.6, exporting yabeda's series names, judged with `analysis.metrics.preset: yabeda`.
//! The promotion with absolute latency and queue-time limits runs alone (serial/ruby.rs).

use e2e_tests::{
    deciding_check, decision_of, ensure, run, status, Exp, Phase, Target, RATE, REPLICAS,
};
use serde_json::json;

/// A config too small for its share — Puma 1×1 at ~150 ms a request (~6.5 req/s), offered
/// ~7.5 req/s at the first stage — rolled back on Puma's own backlog (no `X-Request-Start`
/// needed). The load keeps its connections 30 s, as a load balancer's keep-alive pool does:
/// Puma counts only requests on connections it has accepted, and stops accepting while its
/// threads are busy, so with connections re-made every few seconds a saturated 1×1 showed a
/// backlog of 0.2–0.5 (the rest waited in the kernel's accept queue). The capacity gate,
/// which would refuse this step from the measured times alone, is off so that the check under
/// test is what decides. A saturated Puma also fails its readiness probe (the probe waits for
/// the one thread like any request): the candidate's pod leaves the Service and the target
/// grows back by it, so the ready pods dip by that pod (2 of 3 when run alone).
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn ruby_backlog() {
    run("ruby_backlog", async |s| {
        let target = Target {
            io_ms: 150,
            ..Target::reference_app()
        };
        s.deploy_target(&target).await?;
        s.start_kept_load(240, RATE, "30s").await?;
        let exp = Exp::new(
            "too-small",
            json!({"server": "puma", "workers": 1, "threads": 1}),
            json!([{"metric": "backlog", "max": "0.5"}, {"metric": "errorRate", "max": "50%"}]),
        )
        .extra(json!({"analysis": {"metrics": {"preset": "yabeda"},
                                    "maxPredictedUtilization": "off"}}));
        s.apply(&exp).await?;
        let (e, min_ready) = s
            .min_ready_while(s.wait_phase("too-small", 240, Phase::RolledBack))
            .await?;
        let st = status(&e);
        let failed = deciding_check(&e)
            .ok_or_else(|| anyhow::anyhow!("no failed check: {}", decision_of(&e)))?;
        s.log(format!(
            "failed: {} baseline {:?} candidate {:?} limit {}",
            failed.name, failed.baseline, failed.candidate, failed.limit
        ));
        ensure!(
            failed.name == "backlog",
            "rolled back on {}, not backlog",
            failed.name
        );
        ensure!(
            failed.candidate.is_some_and(|b| b > 0.5),
            "candidate backlog {:?} is not over the limit",
            failed.candidate
        );
        let msg = st.decision.map(|d| d.message).unwrap_or_default();
        ensure!(
            msg.contains("backlog"),
            "decision does not name backlog: {msg}"
        );
        // The Service never lost its last endpoint. Alone the ready pods dipped by the
        // candidate's one pod at most (2 of 3); side by side with other scenarios a baseline
        // pod's readiness probe (through Puma's pool) timed out too: with 1 s once all of them
        // at the same time, hence the reference app's 3 s (Target::reference_app).
        s.log(format!("ready pods never below {min_ready}"));
        ensure!(
            min_ready >= 1,
            "the Service had no ready pod (target {REPLICAS})"
        );
        s.expect_event("too-small", "RolledBack").await?;
        s.stop_load().await;
        s.assert_baseline_restored().await
    })
    .await;
}
