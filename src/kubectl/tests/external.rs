//! `promotion: external` in the plugin: `get` shows the patch to commit, `approve` refuses.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::*;
use crate::api::ConcurrencyExperiment;
use crate::kubectl::control::{self, Control};
use crate::kubectl::render::experiment_detail;
use crate::kubectl::PluginError;

const PATCH: &str = "spec:\n  template:\n    spec:\n      containers:\n      - name: web\n        \
                     env:\n        - name: RAILS_MAX_THREADS\n          value: '4'\n";

fn held_for_git() -> serde_json::Value {
    edited(|v| {
        v["spec"]["promotion"] = json!("external");
        let s = &mut v["status"];
        s["phase"] = json!("Paused");
        s["holdReason"] = json!("AwaitingExternalPromotion");
        s["stageIndex"] = json!(2);
        s["stage"] = json!("3/3");
        s["promotionPatch"] = json!({
            "container": "web",
            "summary": "set RAILS_MAX_THREADS=4 on container web",
            "strategicMergePatch": PATCH,
        });
    })
}

#[test]
fn get_shows_the_hold_and_the_patch_ready_to_commit() {
    let exp: ConcurrencyExperiment = serde_json::from_value(held_for_git()).unwrap();
    let text = experiment_detail(&exp, "2026-11-30T01:12:30Z".parse().unwrap());
    assert!(
        text.contains(
            "Hold:        AwaitingExternalPromotion — all stages passed; commit the patch below to \
             Deployment storefront in Git: the experiment completes once the target runs it\n\
             Promotion:   set RAILS_MAX_THREADS=4 on container web (strategic merge patch)\n  \
             spec:\n    template:\n      spec:\n        containers:\n        - name: web\n          \
             env:\n          - name: RAILS_MAX_THREADS\n            value: '4'\n\n"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn approve_refuses_a_hold_for_git_without_patching() {
    let name = "storefront-threads";
    let script = vec![Exchange::new("GET", &exp_path(name), 200, &held_for_git())];
    let (session, seen, server) = scripted(script);
    let mut out = Vec::new();
    let result = control::run(&session, Control::Approve, name, &mut out).await;
    server.abort();
    let Err(PluginError::Refused(msg)) = result else {
        panic!("not refused: {result:?}");
    };
    assert_eq!(
        msg,
        "storefront-threads: is held for Git (AwaitingExternalPromotion): with promotion: \
         external the commit promotes, never an approval — `kubectl concurrency get \
         storefront-threads` shows the patch to commit"
    );
    assert_eq!(lines(&seen).len(), 1, "no patch");
}
