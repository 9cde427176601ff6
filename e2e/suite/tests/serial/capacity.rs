//! The capacity gate and the last stage on the real cluster (issue 15): a 1-replica target of
//! Puma 2×6 under 20 req/s (2 ms CPU + 60 ms I/O per request). One Puma 1×1 pod serves at most
//! ~16 req/s: the step to 100 % must be refused from stage 2's numbers, before users see it; a
//! 2×3 candidate has room and promotes. Both with zero failed requests as the load generator
//! counts them.

use e2e_tests::{alone, ensure, name_of, run, status, Exp, Progress, Scenario, Target};
use serde_json::json;

/// The load: 20 req/s on one baseline pod.
const RATE: u32 = 20;

fn one_replica() -> Target {
    Target {
        replicas: 1,
        // The target's own pod is scaled to 0 at the last stage (capacity_promote): the
        // operator never edits the user's template, so its drain is the app's. 5 s once lost 9
        // of 1660 requests here (connections refused by a pod that had exited while kube-proxy
        // still sent new connections to it, on a loaded machine).
        drain_s: Some(10),
        ..Target::default()
    }
}

/// The same without any `preStop`: gvl-sim exits at SIGTERM at once, as many apps do. Only the
/// candidate's pods are removed in a rollback before the last stage, and those the operator
/// gives its own drain (`traffic.drainDelay`, 10 s): no request may be lost even so (issue 28).
fn one_replica_without_a_drain() -> Target {
    Target {
        drain_s: None,
        ..one_replica()
    }
}

/// Queue time and errors. The bound is loose on purpose: a 1×1 pod at 50 % of 20 req/s runs
/// at ~65 % of its capacity, where Poisson arrivals already queue for ~65 ms on average (p90
/// 67 ms seen here against the 50 ms bound) — this scenario is about the step the
/// checks cannot see coming, so the checks must pass at 50 %.
fn queue_check() -> serde_json::Value {
    json!([
        {"metric": "queueTime", "quantile": 0.9, "max": "250ms"},
        {"metric": "errorRate", "max": "5%"},
    ])
}

/// The 1-replica target under the load, experiment `name` trying `candidate`, followed
/// to its end (at most `timeout_s`); returns it and the fewest ready pods seen meanwhile. The
/// load (at most 600 s) is stopped by [`assert_no_failed_requests`].
///
/// Its client waits 15 s for an answer, not the suite's 5 s: the 1×1 candidate runs at ~2/3
/// of its capacity at 50 % on purpose, where one request in ~6 runs was answered after more
/// than 5 s (a timeout, never an error; Puma takes a new connection only with an idle thread,
/// so a stall of the node of a few seconds queues it behind every kept-alive request — seen
/// in a model of gvl-sim's reactor: 2–3× slower service for 4–6 s). Slow is what the
/// queue-time check judges; lost — sent to a pod that is gone — is still refused, reset or
/// never answered.
async fn walk(
    s: &Scenario,
    target: &Target,
    name: &str,
    candidate: serde_json::Value,
    timeout_s: u64,
) -> anyhow::Result<(e2e_tests::ConcurrencyExperiment, usize)> {
    s.deploy_target(target).await?;
    s.start_patient_load(600, RATE, "15s").await?;
    s.apply(&Exp::new(name, candidate, queue_check()).stage_s(30))
        .await?;
    let progress = Progress {
        timeout_s,
        ..Progress::default()
    };
    s.min_ready_while(s.progress(name, progress)).await
}

/// The load ran through the whole experiment (stopped only now) and lost nothing.
async fn assert_no_failed_requests(s: &Scenario) -> anyhow::Result<()> {
    // The candidate's pods leave after the experiment ends (their preStop sleep, then exit):
    // the count must cover that too.
    e2e_tests::eventually(60, "the candidate's pods gone", async || {
        let pods = s.pods.list(&Default::default()).await?;
        Ok(!pods.items.iter().any(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("storefront-candidate-"))
        }))
    })
    .await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let load = s.stop_load_and_count().await?;
    s.log(format!(
        "load: {} answered, {} failed (errors {}, timeouts {}, statuses {:?}, unsent {}), \
         latency p99.9 {:.0} ms, max {:.0} ms{}",
        load.answered,
        load.failed(),
        load.errors,
        load.timeouts,
        load.statuses,
        load.unsent,
        load.latency_ms.get("p99.9").copied().unwrap_or_default(),
        load.latency_ms.get("max").copied().unwrap_or_default(),
        load.last_error
            .as_deref()
            .map(|e| format!(", last error: {e}"))
            .unwrap_or_default()
    ));
    ensure!(
        load.answered > 1000,
        "only {} requests answered",
        load.answered
    );
    ensure!(
        load.failed() == 0,
        "{} of {} requests failed for the user:{}",
        load.failed(),
        load.answered + load.errors + load.timeouts,
        load.failures_text()
    );
    Ok(())
}

/// 1×1 cannot carry 100 %: rolled back before stage 3 with `InsufficientCapacity`, the
/// prediction's numbers in status, the target never below its pod, no request lost — with a
/// target that has no `preStop` (the candidate's pod drains by the operator's own).
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn capacity_rollback() {
    let _alone = alone().await;
    run("capacity_rollback", async |s| {
        let (e, min_ready) = walk(
            s,
            &one_replica_without_a_drain(),
            "small",
            json!({"server": "puma", "workers": 1, "threads": 1}),
            180,
        )
        .await?;
        let st = status(&e);
        ensure!(
            name_of(&st.phase) == "RolledBack",
            "phase is {}, not RolledBack: {:?}",
            name_of(&st.phase),
            st.message
        );
        let d = st
            .decision
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no decision"))?;
        ensure!(
            d.reason == "InsufficientCapacity",
            "rolled back for {}, not InsufficientCapacity: {}",
            d.reason,
            d.message
        );
        ensure!(
            d.message.starts_with("Rolling back before stage 3/3")
                && d.message.contains("predicted utilization"),
            "the decision does not give the prediction: {}",
            d.message
        );
        ensure!(
            st.stage_index == Some(1),
            "decided at stage index {:?}, not from stage 2",
            st.stage_index
        );
        let gate = st
            .capacity_gate
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no status.capacityGate"))?;
        let predicted = gate.predicted_utilization.unwrap_or_default();
        let capacity = gate.capacity_per_pod.unwrap_or_default();
        let rate = gate.predicted_rate_per_pod.unwrap_or_default();
        ensure!(
            gate.stage_index == 2
                && name_of(&gate.verdict) == "Fail"
                && predicted > gate.max_utilization,
            "capacityGate is not a failed prediction for stage 3: {gate:?}"
        );
        // The model says ~16 req/s for 1×1 at 62 ms; the measured times drive it.
        ensure!(
            (8.0..=24.0).contains(&capacity) && (14.0..=26.0).contains(&rate),
            "capacity {capacity:.1} req/s or predicted rate {rate:.1} req/s is far from the \
             model's 16 and the load's 20"
        );
        let observed = st
            .analyses
            .iter()
            .filter(|a| a.stage_index == 1)
            .filter_map(|a| a.capacity.as_ref()?.candidate.as_ref()?.per_pod_rate)
            .fold(0.0_f64, f64::max);
        let queue: Vec<String> = st
            .analyses
            .iter()
            .flat_map(|a| a.checks.iter().filter(|c| c.name == "queueTime"))
            .filter_map(|c| c.candidate.map(|v| format!("{:.0}ms", v * 1000.0)))
            .collect();
        s.log(format!(
            "predicted for stage 3: {rate:.1} req/s per pod on a capacity of {capacity:.1} \
             ({:.0}% > {:.0}%); observed at stage 2: {observed:.1} req/s per candidate pod; \
             candidate queue time p90 per analysis: {}",
            predicted * 100.0,
            gate.max_utilization * 100.0,
            queue.join(" ")
        ));
        ensure!(observed > 5.0, "no per-pod rate observed at stage 2");
        ensure!(min_ready >= 1, "the Service had no ready pod at some point");
        s.assert_target_intact(1).await?;
        assert_no_failed_requests(s).await
    })
    .await;
}

/// 2×3 has room (~97 req/s per pod): walks 50/50/100 — the last beside a standby pod until an
/// analysis there passed — and promotes, no request lost.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn capacity_promote() {
    let _alone = alone().await;
    run("capacity_promote", async |s| {
        let (e, min_ready) = walk(
            s,
            &one_replica(),
            "roomy",
            json!({"server": "puma", "workers": 2, "threads": 3}),
            260,
        )
        .await?;
        let st = status(&e);
        ensure!(
            name_of(&st.phase) == "Succeeded",
            "phase is {}, not Succeeded: {:?}",
            name_of(&st.phase),
            st.message
        );
        let gate = st
            .capacity_gate
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no status.capacityGate"))?;
        s.log(format!(
            "capacity gate for stage 3: {:?} req/s per pod on {:?} ({:?})",
            gate.predicted_rate_per_pod, gate.capacity_per_pod, gate.predicted_utilization
        ));
        ensure!(
            gate.stage_index == 2 && name_of(&gate.verdict) == "Pass",
            "the step to 100% was not a passed prediction: {gate:?}"
        );
        s.expect_event("roomy", "StandbyReleased").await?;
        ensure!(min_ready >= 1, "the Service had no ready pod at some point");
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(threads == "3", "target runs {threads} threads, not 3");
        assert_no_failed_requests(s).await
    })
    .await;
}
