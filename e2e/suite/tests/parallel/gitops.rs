//! `promotion: external`: the operator holds at the last stage with the patch to commit and
//! completes once the target's template carries the candidate config because "Git" (here a
//! strategic merge patch under Argo CD's field manager) changed it — never writing the
//! template itself.

use e2e_tests::{decision_of, ensure, kc, run, status, tolerant_check, Exp, Phase, Target, RATE};
use kube::api::{Patch, PatchParams};
use serde_json::json;

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn gitops() {
    run("gitops", async |s| {
        s.deploy_target(&Target::default()).await?;
        s.start_load(300, RATE).await?;
        s.apply(
            &Exp::new(
                "git",
                json!({"server": "puma", "workers": 2, "threads": 4}),
                tolerant_check(),
            )
            .stage_s(20)
            .extra(json!({"promotion": "external"})),
        )
        .await?;
        let held = s
            .wait_cexp("git", 300, "held for the external promotion", |e| {
                status(e).hold_reason.as_deref() == Some("AwaitingExternalPromotion")
            })
            .await?;
        let st = status(&held);
        ensure!(st.phase == Phase::Paused, "phase {:?}", st.phase);
        let patch = st
            .promotion_patch
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no promotionPatch"))?;
        ensure!(
            patch.summary.contains("RAILS_MAX_THREADS=4") && patch.container == "web",
            "patch summary {}",
            patch.summary
        );
        // The hold's Event follows the status that showed it (status is written first): waited
        // for, as a clean CI run once read the Events before it was recorded.
        s.expect_event_once("git", "AwaitingExternalPromotion")
            .await?;
        let notes: Vec<String> = s
            .events("git")
            .await?
            .into_iter()
            .filter(|e| e.reason == "AwaitingExternalPromotion")
            .map(|e| e.note)
            .collect();
        ensure!(
            notes.len() == 1 && notes[0].contains(&patch.summary),
            "hold Events {notes:?}"
        );
        let ns = s.ns.clone();
        let (ok, out) = kc(&["-n", &ns, "get", "git"]).await?;
        ensure!(
            ok && out.contains("Promotion:"),
            "kubectl concurrency get: {out}"
        );
        let (ok, out) = kc(&["-n", &ns, "approve", "git"]).await?;
        ensure!(
            !ok && out.contains("held for Git"),
            "approve of an external hold: {out}"
        );
        // Held for as long as Git takes: two more intervals, the template untouched.
        let generation = s.deploy("storefront").await?.metadata.generation;
        tokio::time::sleep(std::time::Duration::from_secs(25)).await;
        let e = s.cexp("git").await?;
        ensure!(
            status(&e).hold_reason.as_deref() == Some("AwaitingExternalPromotion"),
            "hold lifted: {:?}",
            status(&e).message
        );
        let d = s.deploy("storefront").await?;
        ensure!(
            d.metadata.generation == generation,
            "the target was written while held"
        );
        let owns_template = d
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .any(|m| {
                m.manager.as_deref() == Some("concurrency-operator")
                    && m.fields_v1
                        .as_ref()
                        .is_some_and(|f| f.0.pointer("/f:spec/f:template").is_some())
            });
        ensure!(
            !owns_template,
            "the operator owns template fields of the target"
        );
        // Git brings the commit: a strategic merge of the reported patch, as Argo CD's sync.
        let body: serde_json::Value = serde_yaml::from_str(&patch.strategic_merge_patch)?;
        let argo = PatchParams {
            field_manager: Some("argocd-controller".into()),
            ..Default::default()
        };
        s.deploys
            .patch("storefront", &argo, &Patch::Strategic(&body))
            .await?;
        let e = s.progress("git", Default::default()).await?;
        ensure!(
            decision_of(&e) == "Promote/PromotedExternally",
            "decision {}",
            decision_of(&e)
        );
        ensure!(
            !s.has_event("git", "TargetChanged").await?,
            "a TargetChanged Event"
        );
        ensure!(
            s.env("storefront", "RAILS_MAX_THREADS").await? == "4",
            "target threads"
        );
        s.assert_target_intact(e2e_tests::REPLICAS).await
    })
    .await;
}
