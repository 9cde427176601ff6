//! The real Ruby server in the cluster (issue 13): a canary of the reference app on Debian's
//! Ruby 3.1 and Puma 5.6, judged with `analysis.metrics.preset: yabeda` against absolute
//! latency and queue-time limits — alone, since Ruby's CPU per request is what other
//! scenarios' load would take on a 2-core machine (side by side it once saw 385 ms baseline
//! latency).

use e2e_tests::{
    alone, decision_of, ensure, run, status, ConcurrencyExperiment, Exp, Progress, Target, RATE,
    REPLICAS,
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
        let load = s.stop_load_and_count().await?;
        s.log(format!(
            "load: {} answered, {} failed",
            load.answered,
            load.failed()
        ));
        ensure!(
            load.failed() == 0,
            "{} of {} requests failed: {load:?}",
            load.failed(),
            load.answered + load.failed()
        );
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}
