//! The target or the experiment changed under the operator: a person's edits of the target,
//! Puma configured by flags, an abort and a retry through the kubectl plugin.

use e2e_tests::{
    decision_of, ensure, kc, name_of, phase_of, run, status, tolerant_check, Exp, Phase, Progress,
    Scenario, Target, RATE, REPLICAS,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;

fn puma_2x4() -> serde_json::Value {
    json!({"server": "puma", "workers": 2, "threads": 4})
}

async fn rename_container(s: &Scenario, name: &str) -> anyhow::Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/name", "value": name}
    ]))?;
    s.deploys
        .patch(
            "storefront",
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await?;
    Ok(())
}

/// The target's pod template edited by a person mid-flight: its container renamed in stage 2,
/// then (a second experiment) its env changed at 100 %, when the baseline runs 0 pods. Both
/// roll back with TargetChanged, the target back at its original replicas, nothing promoted.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn target_changed() {
    run("target_changed", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(400, RATE).await?;
        s.apply(&Exp::new("renamed", puma_2x4(), tolerant_check()))
            .await?;
        s.wait_cexp("renamed", 150, "second stage reached", |e| {
            status(e).stage_index == Some(1)
        })
        .await?;
        rename_container(s, "app").await?;
        let e = s.wait_phase("renamed", 120, Phase::RolledBack).await?;
        ensure!(
            decision_of(&e) == "Rollback/TargetChanged",
            "decision {}",
            decision_of(&e)
        );
        s.log(format!(
            "renamed: {}",
            status(&e).decision.map(|d| d.message).unwrap_or_default()
        ));
        s.assert_target_intact(REPLICAS).await?;
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "6",
            "the rolled-back target runs {threads} threads, a config it did not have"
        );
        s.delete_cexp("renamed", 60).await?;
        // The person's rename stays; put the container's name back for the next experiment.
        rename_container(s, "web").await?;
        s.rollout("storefront", 90).await?;

        // At 100 % (the baseline scaled to 0): an env edit by a person (`kubectl set env`).
        s.apply(&Exp::new("at100", puma_2x4(), tolerant_check()).stage_s(40))
            .await?;
        s.wait_cexp("at100", 200, "last stage in force", |e| {
            status(e).effective_weight == 100
        })
        .await?;
        let edit = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "env": [{"name": "IO_MS", "value": "61"}]}
        ]}}}});
        s.deploys
            .patch(
                "storefront",
                &PatchParams::default(),
                &Patch::Strategic(&edit),
            )
            .await?;
        let e = s.wait_phase("at100", 120, Phase::RolledBack).await?;
        ensure!(
            decision_of(&e) == "Rollback/TargetChanged",
            "decision {}",
            decision_of(&e)
        );
        s.log(format!(
            "env edited at 100%: {}",
            status(&e).decision.map(|d| d.message).unwrap_or_default()
        ));
        s.assert_target_intact(REPLICAS).await?;
        let io = s.env("storefront", "IO_MS").await?;
        ensure!(io == "61", "the person's edit was undone (IO_MS={io})");
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "6",
            "promoted a template that was never judged ({threads} threads)"
        );
        Ok(())
    })
    .await;
}

/// Logs of the pods (not being deleted) whose name `matches`.
async fn pod_logs(
    s: &Scenario,
    matches: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let pods = s
        .pods
        .list(&ListParams::default().labels("app=storefront"))
        .await?;
    let mut out = Vec::new();
    for p in pods
        .items
        .iter()
        .filter(|p: &&Pod| p.metadata.deletion_timestamp.is_none())
    {
        let name = p.name_any();
        if matches(&name) {
            let log = s.pods.logs(&name, &LogParams::default()).await?;
            out.push((name, log));
        }
    }
    Ok(out)
}

/// Puma's concurrency in flags (`puma -w 2 -t 6:6`, as Procfiles do; gvl-sim honours the flags
/// over the environment like Puma): the candidate must run 2×4, not inherit the baseline's
/// flags, and so must every pod of the promoted target.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn puma_flags() {
    run("puma_flags", async |s| {
        let args = ["serve", "-w", "2", "-t", "6:6"].map(String::from).to_vec();
        s.deploy_target(&Target {
            args: Some(args),
            ..Target::default()
        })
        .await?;
        s.start_load(240, RATE).await?;
        s.apply(&Exp::new("flags", puma_2x4(), tolerant_check()).stage_s(15))
            .await?;
        e2e_tests::wait_for(
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
        .await?;
        let e = s.cexp("flags").await?;
        let baseline = status(&e).baseline.map(|b| b.summary).unwrap_or_default();
        ensure!(baseline == "puma 2×6", "baseline read back as {baseline}");
        let args = s.container("storefront-candidate").await?.args;
        s.log(format!("candidate args: {args:?}"));
        let logs = pod_logs(s, |n| n.contains("storefront-candidate")).await?;
        ensure!(!logs.is_empty(), "no candidate pod");
        for (pod, log) in &logs {
            ensure!(
                log.contains("workers: 2, threads: 4,"),
                "candidate pod {pod} does not run 2×4: {}",
                log.chars().take(300).collect::<String>()
            );
        }
        let e = s.progress("flags", Progress::default()).await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}",
            decision_of(&e)
        );
        let args = s.container("storefront").await?.args.unwrap_or_default();
        ensure!(
            args.iter().any(|a| a.contains("4:4")),
            "the promoted target's flags are {args:?}"
        );
        s.rollout("storefront", 90).await?;
        let logs = pod_logs(s, |n| !n.contains("candidate")).await?;
        ensure!(!logs.is_empty(), "no target pod");
        for (pod, log) in &logs {
            ensure!(
                log.contains("workers: 2, threads: 4,"),
                "the promoted target's pod {pod} does not run 2×4"
            );
        }
        Ok(())
    })
    .await;
}

/// Rolled back (here: aborted at stage 1), then retried in place with the one-shot
/// annotation: a fresh start at stage 1 that runs to promotion. Through the kubectl plugin, as
/// a person would: a refusal first (nothing to approve on an auto experiment mid-stage, exit
/// code 1), then abort and retry.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn retry() {
    run("retry", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(300, RATE).await?;
        s.apply(&Exp::new("again", puma_2x4(), tolerant_check()).stage_s(15))
            .await?;
        s.wait_cexp("again", 90, "first analysis", |e| {
            status(e).last_verdict.is_some()
        })
        .await?;
        let ns = s.ns.as_str();
        let (ok, out) = kc(&["-n", ns, "approve", "again"]).await?;
        ensure!(!ok, "approve mid-stage was accepted: {out}");
        ensure!(
            out.contains("nothing to approve"),
            "approve refusal does not say why: {out}"
        );
        let (ok, out) = kc(&["-n", ns, "get", "again"]).await?;
        ensure!(ok, "kubectl concurrency get failed: {out}");
        let progressing = out.lines().any(|l| {
            l.split_once("Phase:")
                .is_some_and(|(_, rest)| rest.trim_start_matches(' ').starts_with("Progressing"))
        });
        ensure!(
            progressing,
            "get does not show the phase Progressing: {out}"
        );
        let (ok, out) = kc(&["-n", ns, "abort", "again"]).await?;
        ensure!(
            ok && out.contains("abort requested"),
            "kubectl concurrency abort: {out}"
        );
        let e = s.wait_phase("again", 90, Phase::RolledBack).await?;
        ensure!(
            decision_of(&e) == "Rollback/Aborted",
            "decision {}",
            decision_of(&e)
        );
        let (ok, out) = kc(&["-n", ns, "retry", "again"]).await?;
        ensure!(
            ok && out.contains("retry requested (concurrency.dev/retry=true)"),
            "kubectl concurrency retry: {out}"
        );
        s.wait_cexp("again", 60, "retried", |e| {
            matches!(phase_of(e), Some(Phase::Pending | Phase::Progressing))
        })
        .await?;
        let e = s
            .wait_cexp(
                "again",
                30,
                "retry annotation removed by the operator",
                |e| !e.annotations().contains_key("concurrency.dev/retry"),
            )
            .await?;
        s.expect_event("again", "Retried").await?;
        let st = status(&e);
        ensure!(
            st.failed_analyses + st.inconclusive_analyses == 0,
            "counters not reset: failed {} inconclusive {}",
            st.failed_analyses,
            st.inconclusive_analyses
        );
        ensure!(
            st.decision.is_none(),
            "old decision kept: {:?}",
            st.decision.map(|d| name_of(&d.reason))
        );
        let e = s.progress("again", Progress::default()).await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}",
            decision_of(&e)
        );
        let (ok, out) = kc(&["-n", ns, "history", "again"]).await?;
        ensure!(ok, "kubectl concurrency history failed: {out}");
        ensure!(
            out.contains("analyses kept in status")
                && out.contains("Decision: Promote (StagesPassed)"),
            "history does not show the analyses and the decision: {out}"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "target runs {threads} threads, not the candidate's 4"
        );
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}

/// `spec.candidate` edited mid-flight (2×4 → 2×3 at stage 2): the experiment starts over at
/// stage 1 with a fresh history and a `SpecChanged` Event, the candidate Deployment is
/// re-rendered with the new config, no analysis of the old config is kept, and what is
/// promoted is the config that was judged — 2×3.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn candidate_edited() {
    run("candidate_edited", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(400, RATE).await?;
        s.apply(&Exp::new("edited", puma_2x4(), tolerant_check()))
            .await?;
        s.wait_cexp("edited", 150, "second stage reached", |e| {
            status(e).stage_index == Some(1)
        })
        .await?;
        let patch = json!({"spec": {"candidate": {"threads": 3}}});
        s.cexps
            .patch("edited", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let e = s
            .wait_cexp("edited", 60, "back at stage 1 for the new config", |e| {
                status(e).stage_index == Some(0)
                    && status(e)
                        .candidate
                        .as_ref()
                        .is_some_and(|c| c.summary == "puma 2×3")
            })
            .await?;
        ensure!(
            status(&e).failed_analyses == 0
                && status(&e).inconclusive_analyses == 0
                && status(&e).analyses.iter().all(|a| a.stage_index == 0),
            "the history was not reset: {:?}",
            status(&e)
                .analyses
                .iter()
                .map(|a| a.stage_index)
                .collect::<Vec<_>>()
        );
        s.expect_event("edited", "SpecChanged").await?;
        let e = s.progress("edited", Progress::default()).await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}",
            decision_of(&e)
        );
        // Every analysis the status kept is of the new config: none from before the edit.
        let first = status(&e).analyses.first().map(|a| a.stage_index);
        s.log(format!(
            "kept analyses by stage: {:?}",
            status(&e)
                .analyses
                .iter()
                .map(|a| a.stage_index)
                .collect::<Vec<_>>()
        ));
        ensure!(
            first == Some(0),
            "the kept history does not start at stage 1 of the new config"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "3",
            "the target runs {threads} threads, not the edited 3"
        );
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}
