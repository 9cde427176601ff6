//! One candidate against a fresh baseline (`spec.baseline: {fresh: true}`, issue 12): Ruby
//! memory grows with pod age (seed 004), so a candidate judged against long-running pods looks
//! smaller than it is. gvl-sim holds a simulated heap that grows by the minute here; the
//! target's pods have aged before the experiment starts.

use std::time::Duration;

use e2e_tests::{
    deciding_check, decision_of, ensure, run, status, Exp, Phase, Target, RATE, REPLICAS,
};
use serde_json::json;

/// Puma 2×6 → 2×8 (more threads hold more memory: +16 % on young pods), `memory` at most
/// +10 %. Against the target's aged pods the candidate would look ~25 % smaller and pass;
/// against the fresh baseline — started with it, as young — it fails and is rolled back, and
/// status shows both baselines' memory side by side.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn fresh_baseline() {
    run("fresh_baseline", async |s| {
        s.deploy_target(&Target {
            memory_limit: "768Mi".into(),
            drain_s: Some(10),
            env: vec![
                ("WORKER_MEMORY_MB", "40".into()),
                ("THREAD_MEMORY_MB", "6".into()),
                // 40 MiB a minute: two minutes of age are ~80 MiB, half again the young size.
                ("MEMORY_GROWTH_KB_PER_MINUTE", "40960".into()),
            ],
            ..Target::default()
        })
        .await?;
        s.start_load(400, RATE).await?;
        // The target's pods age (and Prometheus sees it) before the candidate exists.
        tokio::time::sleep(Duration::from_secs(120)).await;
        let exp = Exp::new(
            "fresh",
            json!({"server": "puma", "workers": 2, "threads": 8}),
            json!([
                {"metric": "memory", "maxIncrease": "10%"},
                {"metric": "errorRate", "max": "5%"},
            ]),
        )
        // cAdvisor samples the working set every 15–30 s here: each interval must hold one.
        .interval_s(30)
        .stage_s(90)
        .extra(json!({"baseline": {"fresh": true}}));
        s.apply(&exp).await?;
        let (e, min_ready) = s
            .min_ready_while(s.wait_phase("fresh", 300, Phase::RolledBack))
            .await?;
        let st = status(&e);
        ensure!(
            decision_of(&e) == "Rollback/CheckFailed",
            "decision {}",
            decision_of(&e)
        );
        let failed = deciding_check(&e).ok_or_else(|| anyhow::anyhow!("no failed check"))?;
        s.log(format!(
            "failed: {} fresh baseline {:?} candidate {:?} limit {}",
            failed.name, failed.baseline, failed.candidate, failed.limit
        ));
        ensure!(failed.name == "memory", "failed on {}", failed.name);
        let measured = st
            .fresh_baseline
            .as_ref()
            .and_then(|f| f.measured.clone())
            .ok_or_else(|| anyhow::anyhow!("no status.freshBaseline.measured"))?;
        let memory = measured
            .checks
            .iter()
            .find(|c| c.name == "memory")
            .ok_or_else(|| anyhow::anyhow!("no memory in freshBaseline.measured"))?;
        s.log(format!(
            "memory: long-running target {:?}, fresh baseline {:?}",
            memory.target, memory.fresh
        ));
        let (old, young, cand) = (
            memory.target.unwrap_or(0.0),
            memory.fresh.unwrap_or(f64::MAX),
            failed.candidate.unwrap_or(0.0),
        );
        ensure!(
            old > young,
            "the aged target ({old}) does not hold more than the fresh baseline ({young})"
        );
        // What the old comparison would have said: the candidate under the aged pods.
        ensure!(
            cand < old,
            "the candidate ({cand}) is not below the aged target ({old}): the test shows nothing"
        );
        ensure!(
            failed
                .baseline
                .is_some_and(|b| (b - young).abs() / young < 0.25),
            "the candidate was not judged against the fresh baseline ({:?} vs fresh {young})",
            failed.baseline
        );
        ensure!(
            min_ready >= REPLICAS as usize,
            "ready pods dropped to {min_ready}"
        );
        s.gone("storefront-fresh-baseline", 90).await?;
        s.stop_load().await;
        s.assert_baseline_restored().await
    })
    .await;
}
