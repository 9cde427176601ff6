//! The real Ruby server in the cluster (issue 13): a canary of the reference app on Debian's
//! Ruby 3.1 and Puma 5.6, judged with `analysis.metrics.preset: yabeda` against absolute
//! latency and queue-time limits — alone, since Ruby's CPU per request is what other
//! scenarios' load would take on a 2-core machine (side by side it once saw 385 ms baseline
//! latency).

use e2e_tests::{
    alone, deciding_check, decision_of, ensure, run, status, ConcurrencyExperiment, Exp, Phase,
    Progress, Target, Verdict, RATE, REPLICAS,
};
use serde_json::{json, Value};

/// Every check the yabeda preset maps: request histogram and counter (yabeda-rails), queue
/// time (yabeda-rack-queue), Puma's backlog and busy threads (yabeda-puma-plugin).
fn yabeda_checks() -> Value {
    json!([
        {"metric": "latency", "quantile": 0.9, "maxIncrease": "50%", "max": "250ms"},
        {"metric": "errorRate", "max": "5%"},
        {"metric": "queueTime", "quantile": 0.9, "max": "100ms"},
        {"metric": "backlog", "max": 2},
        {"metric": "threadUtilization", "max": "90%"},
    ])
}

fn yabeda() -> Value {
    json!({"analysis": {"metrics": {"preset": "yabeda"}}})
}

/// The checks of the newest analysis that measured the candidate, by name.
fn measured(e: &ConcurrencyExperiment) -> Vec<String> {
    status(e)
        .analyses
        .iter()
        .rev()
        .find(|a| a.checks.iter().any(|c| c.candidate.is_some()))
        .map(|a| {
            a.checks
                .iter()
                .filter(|c| c.candidate.is_some())
                .map(|c| c.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Puma 2×6 → 2×4 on real Ruby through 30/70/100 to promotion, every yabeda check measured
/// on the candidate from the exporter's own names, no request lost.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn ruby_promote() {
    let _alone = alone().await;
    run("ruby_promote", async |s| {
        s.deploy_target(&Target::reference_app()).await?;
        s.start_load(300, RATE).await?;
        let exp = Exp::new(
            "ruby",
            json!({"server": "puma", "workers": 2, "threads": 4}),
            yabeda_checks(),
        )
        .extra(yabeda());
        s.apply(&exp).await?;
        let (e, min_ready) = s
            .min_ready_while(s.progress(
                "ruby",
                Progress {
                    timeout_s: 300,
                    ..Progress::default()
                },
            ))
            .await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}: {}",
            decision_of(&e),
            status(&e).message.unwrap_or_default()
        );
        let checks = measured(&e);
        s.log(format!("checks measured on the candidate: {checks:?}"));
        for want in [
            "latency",
            "errorRate",
            "queueTime",
            "backlog",
            "threadUtilization",
        ] {
            ensure!(
                checks.iter().any(|c| c == want),
                "{want} had no candidate value from the yabeda names (measured: {checks:?})"
            );
        }
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(threads == "4", "target runs {threads} threads, not 4");
        ensure!(
            min_ready >= REPLICAS as usize,
            "ready pods dropped to {min_ready}"
        );
        s.stop_load_no_request_lost().await?;
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}

/// Seed 004's move on the reference app: Puma 2×6 → its async server (Falcon's model: one
/// fiber per request, `SERVER=falcon`), 2 workers with `dbPool: 12`, promoted through
/// 30/70/100. The pool is set, never dropped: the candidate and then the target get
/// `DB_POOL=12` and `RAILS_MAX_THREADS=12` (what a default `database.yml` reads; the async
/// worker's semaphore reads them), Puma's own variables go. `dbPoolWait` and `cpuUtilization`
/// are measured on the candidate (40 s intervals: cAdvisor samples CPU every 15–30 s here).
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn ruby_falcon() {
    let _alone = alone().await;
    run("ruby_falcon", async |s| {
        s.deploy_target(&Target::reference_app()).await?;
        // Each request: a 40 ms query (under the async worker's pool) and 5 ms of CPU.
        s.start_load_path(300, RATE, "/?db_calls=1&db_ms=40&cpu_ms=5&io_calls=0")
            .await?;
        let exp = Exp::new(
            "ruby-falcon",
            json!({"server": "falcon", "workers": 2, "dbPool": 12, "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi"},
                "limits": {"cpu": "1", "memory": "384Mi"},
            }}),
            json!([
                {"metric": "latency", "quantile": 0.9, "max": "250ms"},
                {"metric": "errorRate", "max": "5%"},
                // 12 connections per worker for a few requests in flight: no wait at all.
                {"metric": "dbPoolWait", "max": "2%"},
                {"metric": "cpuUtilization", "max": "90%"},
            ]),
        )
        .interval_s(40)
        .stage_s(45)
        .extra(yabeda());
        s.apply(&exp).await?;
        let (e, min_ready) = s
            .min_ready_while(s.progress(
                "ruby-falcon",
                Progress {
                    timeout_s: 360,
                    ..Progress::default()
                },
            ))
            .await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}: {}",
            decision_of(&e),
            status(&e).message.unwrap_or_default()
        );
        let seen: Vec<String> = status(&e)
            .analyses
            .iter()
            .flat_map(|a| a.checks.iter())
            .filter(|c| c.candidate.is_some())
            .map(|c| c.name.clone())
            .collect();
        for want in ["dbPoolWait", "cpuUtilization", "latency"] {
            ensure!(
                seen.iter().any(|c| c == want),
                "{want} never had a candidate value (measured: {seen:?})"
            );
        }
        // The worker count as running: the lag probe's loops per pod, 2 as rendered.
        let workers: Vec<(Option<f64>, String)> = status(&e)
            .analyses
            .iter()
            .flat_map(|a| a.checks.iter())
            .filter(|c| c.name == "workers")
            .map(|c| (c.candidate, format!("{:?}", c.verdict)))
            .collect();
        s.log(format!("workers (event loops per pod): {workers:?}"));
        ensure!(
            !workers.is_empty()
                && workers
                    .iter()
                    .all(|(v, verdict)| verdict == "Pass"
                        && v.is_some_and(|v| (v - 2.0).abs() < 0.75)),
            "workers entries {workers:?}"
        );
        let summary = status(&e)
            .candidate
            .map(|c| c.config.summary())
            .unwrap_or_default();
        s.log(format!("candidate: {summary}"));
        ensure!(
            summary == "falcon 2 workers, pool 12",
            "candidate config {summary}"
        );
        for (var, want) in [
            ("SERVER", "falcon"),
            ("WEB_CONCURRENCY", "2"),
            ("DB_POOL", "12"),
            ("RAILS_MAX_THREADS", "12"),
        ] {
            let got = s.env("storefront", var).await?;
            ensure!(got == want, "target {var}={got}, not {want}");
        }
        ensure!(
            s.env("storefront", "PUMA_MAX_THREADS")
                .await
                .unwrap_or_default()
                .is_empty(),
            "PUMA_MAX_THREADS left in the promoted target"
        );
        ensure!(
            min_ready >= REPLICAS as usize,
            "ready pods dropped to {min_ready}"
        );
        s.stop_load_no_request_lost().await?;
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}

/// Seed 004's MiniMagick rollback on the reference app: every request makes a 50 ms call that
/// blocks without yielding (libc `usleep` through Fiddle, as a shell-out or a C extension
/// does). Puma 2×6 runs it in threads beside each other; the async server's worker stalls
/// every fiber meanwhile. At low load latency barely moves, but the event loop runs its timers
/// late a fifth of the time: rolled back at the first stage on `eventLoopLag`, named in the
/// decision, with the latency check of the same analysis passing.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn ruby_falcon_blocking() {
    let _alone = alone().await;
    run("ruby_falcon_blocking", async |s| {
        s.deploy_target(&Target::reference_app()).await?;
        s.start_load_path(180, RATE, "/?block_ms=50&io_calls=0&cpu_ms=2")
            .await?;
        let exp = Exp::new(
            "falcon-blocking",
            json!({"server": "falcon", "workers": 2}),
            json!([
                {"metric": "latency", "quantile": 0.9, "maxIncrease": "200%"},
                {"metric": "eventLoopLag", "max": "10%"},
            ]),
        )
        .extra(yabeda());
        s.apply(&exp).await?;
        let (e, min_ready) = s
            .min_ready_while(s.wait_phase("falcon-blocking", 240, Phase::RolledBack))
            .await?;
        let msg = status(&e).decision.map(|d| d.message).unwrap_or_default();
        s.log(format!("decision: {msg}"));
        ensure!(
            decision_of(&e) == "Rollback/CheckFailed",
            "decision {}: {msg}",
            decision_of(&e)
        );
        let c = deciding_check(&e).ok_or_else(|| anyhow::anyhow!("no failed check"))?;
        ensure!(c.name == "eventLoopLag", "the failed check is {}", c.name);
        ensure!(
            c.candidate.is_some_and(|v| v > 0.1),
            "eventLoopLag {:?}",
            c.candidate
        );
        let deciding = status(&e)
            .analyses
            .iter()
            .rev()
            .find(|a| {
                a.checks
                    .iter()
                    .any(|c| c.name == "eventLoopLag" && c.verdict == Verdict::Fail)
            })
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no analysis failed eventLoopLag"))?;
        let latency = deciding
            .checks
            .iter()
            .find(|c| c.name == "latency")
            .ok_or_else(|| anyhow::anyhow!("no latency check"))?;
        s.log(format!(
            "latency p90: baseline {:?} candidate {:?} ({:?}); eventLoopLag {:?}",
            latency.baseline, latency.candidate, latency.verdict, c.candidate
        ));
        ensure!(
            latency.verdict == Verdict::Pass,
            "latency did not pass in the deciding analysis: {:?}",
            latency.reason
        );
        ensure!(
            min_ready >= REPLICAS as usize,
            "ready pods dropped to {min_ready}"
        );
        ensure!(
            s.env("storefront", "SERVER").await? == "puma",
            "the target does not run Puma any more"
        );
        Ok(())
    })
    .await;
}
