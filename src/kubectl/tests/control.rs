use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::fixtures::*;
use crate::kubectl::control::{self, Control};
use crate::kubectl::PluginError;

fn patch_of(seen: &std::sync::Arc<std::sync::Mutex<Vec<Seen>>>) -> Seen {
    let calls = seen.lock().unwrap();
    let patch = calls.iter().find(|c| c.method == "PATCH").unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    patch.clone()
}

/// Runs `control` on `object`, answering the patch with `patch_code`.
async fn control_on(
    control: Control,
    object: Value,
    patch_code: Option<u16>,
) -> (
    Result<String, PluginError>,
    std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let mut script = vec![Exchange::new("GET", &exp_path(&name), 200, &object)];
    if let Some(code) = patch_code {
        let body = if code == 200 {
            object.clone()
        } else {
            forbidden("patch", &name)
        };
        script.push(Exchange::new("PATCH", &exp_path(&name), code, &body));
    }
    let (session, seen, server) = scripted(script);
    let mut out = Vec::new();
    let result = control::run(&session, control, &name, &mut out).await;
    server.abort();
    (result.map(|()| text(out)), seen)
}

fn manual_gate() -> Value {
    edited(|v| {
        v["spec"]["promotion"] = json!("manual");
        let s = &mut v["status"];
        s["phase"] = json!("Paused");
        s["holdReason"] = json!("AwaitingApproval");
        s["stageIndex"] = json!(2);
        s["stage"] = json!("3/3");
    })
}

#[tokio::test]
async fn approve_at_the_promotion_gate_sets_the_one_shot_annotation() {
    let (out, seen) = control_on(Control::Approve, manual_gate(), Some(200)).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: approved (concurrency.dev/approve=true); the operator promotes the \
         candidate into the target and removes the annotation\n"
    );
    let path = exp_path("storefront-threads");
    assert_eq!(
        lines(&seen),
        [format!("GET {path}"), format!("PATCH {path}")]
    );
    assert_eq!(
        patch_of(&seen).body,
        json!({"metadata": {"resourceVersion": "100", "annotations": {"concurrency.dev/approve": "true"}}})
    );
    // An inconclusive hold is approved the same way.
    let held = edited(|v| {
        v["status"]["phase"] = json!("Paused");
        v["status"]["holdReason"] = json!("InconclusiveLimit");
    });
    let (out, _) = control_on(Control::Approve, held, Some(200)).await;
    assert!(out
        .unwrap()
        .contains("lifts the inconclusive hold (the count starts again)"));
}

#[tokio::test]
async fn approve_refuses_without_a_hold() {
    let (e, seen) = control_on(Control::Approve, progressing_json(), None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: is Progressing at stage 2/3; approve lifts a hold (phase Paused with \
         holdReason InconclusiveLimit, InsufficientCapacity or AwaitingApproval) or the manual \
         promotion at the last stage — nothing to approve"
    );
    assert_eq!(lines(&seen).len(), 1, "no patch");
    let paused = edited(|v| {
        v["spec"]["paused"] = json!(true);
        v["status"]["phase"] = json!("Paused");
    });
    let (e, _) = control_on(Control::Approve, paused, None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: paused by spec.paused, not held for approval; `kubectl concurrency \
         resume` continues it"
    );
    let mut spent = manual_gate();
    spent["status"]["approveAnnotationConsumed"] = json!(true);
    let (e, _) = control_on(Control::Approve, spent, None).await;
    assert!(matches!(e, Err(PluginError::Refused(_))));
    // At the last stage of a manual promotion, before the hold: approved in advance.
    let last_stage = edited(|v| {
        v["spec"]["promotion"] = json!("manual");
        v["status"]["stageIndex"] = json!(2);
        v["status"]["stage"] = json!("3/3");
    });
    let (out, _) = control_on(Control::Approve, last_stage, Some(200)).await;
    assert!(out
        .unwrap()
        .contains("promotes when the last stage has passed"));
}

#[tokio::test]
async fn abort_sets_the_annotation_and_a_denial_is_one_line() {
    let (out, seen) = control_on(Control::Abort, progressing_json(), Some(200)).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: abort requested (concurrency.dev/abort=true); the operator restores \
         the baseline, then removes the candidate\n"
    );
    assert_eq!(
        patch_of(&seen).body,
        json!({"metadata": {"resourceVersion": "100", "annotations": {"concurrency.dev/abort": "true"}}})
    );
    // A selection is aborted like any running experiment (the machine rolls it back).
    let selecting = edited(|v| v["status"]["phase"] = json!("Selecting"));
    let (out, _) = control_on(Control::Abort, selecting, Some(200)).await;
    assert!(out.unwrap().contains("abort requested"));
    let (e, _) = control_on(Control::Abort, progressing_json(), Some(403)).await;
    let e = e.unwrap_err();
    assert!(matches!(e, PluginError::Forbidden { verb: "patch", .. }));
    assert!(
        e.to_string().starts_with(
            "permission denied (403, RBAC): cannot patch concurrencyexperiments in namespace \"shop\": "
        ),
        "{e}"
    );
}

#[tokio::test]
async fn abort_refuses_once_promoting_or_finished() {
    for (phase, why) in [
        (
            "Promoting",
            "is Promoting: too late to abort, the target may already run the candidate config",
        ),
        ("Succeeded", "is Succeeded: nothing to abort"),
        ("RolledBack", "is RolledBack: nothing to abort"),
        ("RollingBack", "is already rolling back"),
    ] {
        let object = edited(|v| v["status"]["phase"] = json!(phase));
        let (e, seen) = control_on(Control::Abort, object, None).await;
        assert_eq!(
            e.unwrap_err().to_string(),
            format!("storefront-threads: {why}")
        );
        assert_eq!(lines(&seen).len(), 1);
    }
}

#[tokio::test]
async fn retry_only_after_a_rollback_and_clears_a_leftover_abort() {
    let mut object = rolled_back_json();
    object["metadata"]["annotations"] = json!({"concurrency.dev/abort": "true"});
    let (out, seen) = control_on(Control::Retry, object, Some(200)).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: retry requested (concurrency.dev/retry=true); the operator starts \
         again from stage 1 and removes the annotation\n"
    );
    assert_eq!(
        patch_of(&seen).body,
        json!({"metadata": {"resourceVersion": "100", "annotations": {
            "concurrency.dev/retry": "true", "concurrency.dev/abort": null,
        }}})
    );
    let (e, _) = control_on(Control::Retry, progressing_json(), None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: the experiment is Progressing at stage 2/3 — only a RolledBack \
         experiment is retried (abort to roll it back, then retry once it is RolledBack)"
    );
    let mut aborted = rolled_back_json();
    aborted["spec"]["abort"] = json!(true);
    let (e, _) = control_on(Control::Retry, aborted, None).await;
    assert!(e.unwrap_err().to_string().contains("spec.abort is true"));
}

#[tokio::test]
async fn pause_and_resume_patch_spec_paused() {
    let (out, seen) = control_on(Control::Pause, progressing_json(), Some(200)).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: paused (spec.paused: true) at stage 2/3; the operator holds at this \
         stage; analyses keep running and can still roll back\n"
    );
    assert_eq!(
        patch_of(&seen).body,
        json!({"metadata": {"resourceVersion": "100"}, "spec": {"paused": true}})
    );
    let paused = edited(|v| {
        v["spec"]["paused"] = json!(true);
        v["status"]["phase"] = json!("Paused");
    });
    let (e, _) = control_on(Control::Pause, paused.clone(), None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: is already Paused"
    );
    let (out, seen) = control_on(Control::Resume, paused, Some(200)).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: resumed (spec.paused: false); the operator continues\n"
    );
    assert_eq!(
        patch_of(&seen).body,
        json!({"metadata": {"resourceVersion": "100"}, "spec": {"paused": false}})
    );
    let (e, _) = control_on(Control::Resume, progressing_json(), None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: is Progressing at stage 2/3 and not paused (spec.paused is false)"
    );
    let held = edited(|v| {
        v["status"]["phase"] = json!("Paused");
        v["status"]["holdReason"] = json!("InconclusiveLimit");
    });
    let (e, _) = control_on(Control::Resume, held, None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: is held (InconclusiveLimit), not paused by spec.paused; `kubectl \
         concurrency approve` lifts the hold"
    );
    let (e, _) = control_on(Control::Pause, rolled_back_json(), None).await;
    assert_eq!(
        e.unwrap_err().to_string(),
        "storefront-threads: is RolledBack; only a Pending or Progressing experiment can be paused"
    );
}

#[tokio::test]
async fn a_conflict_reads_the_phase_again_before_patching_again() {
    let path = exp_path("storefront-threads");
    let conflict = status(
        409,
        "Conflict",
        "the object has been modified",
        Some("storefront-threads"),
    );
    let moved_on = edited(|v| v["metadata"]["resourceVersion"] = json!("105"));
    let (session, seen, server) = scripted(vec![
        Exchange::new("GET", &path, 200, &progressing_json()),
        Exchange::new("PATCH", &path, 409, &conflict),
        Exchange::new("GET", &path, 200, &moved_on),
        Exchange::new("PATCH", &path, 200, &moved_on),
    ]);
    control::run(
        &session,
        Control::Pause,
        "storefront-threads",
        &mut Vec::new(),
    )
    .await
    .unwrap();
    server.abort();
    let calls = seen.lock().unwrap().clone();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3].body["metadata"]["resourceVersion"], json!("105"));
    // The second read finds the experiment finished: refused, nothing written.
    let finished = edited(|v| v["status"]["phase"] = json!("Succeeded"));
    let (session, seen, server) = scripted(vec![
        Exchange::new("GET", &path, 200, &progressing_json()),
        Exchange::new("PATCH", &path, 409, &conflict),
        Exchange::new("GET", &path, 200, &finished),
    ]);
    let e = control::run(
        &session,
        Control::Abort,
        "storefront-threads",
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        "storefront-threads: is Succeeded: nothing to abort"
    );
    assert_eq!(lines(&seen).len(), 3);
    // Conflicts every time: give up with a clear message.
    let mut script = Vec::new();
    for _ in 0..3 {
        script.push(Exchange::new("GET", &path, 200, &progressing_json()));
        script.push(Exchange::new("PATCH", &path, 409, &conflict));
    }
    let (session, _, server) = scripted(script);
    let e = control::run(
        &session,
        Control::Pause,
        "storefront-threads",
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert!(
        matches!(e, PluginError::Conflict { attempts: 3, .. }),
        "{e}"
    );
}

#[tokio::test]
async fn already_requested_is_not_written_twice() {
    let mut object = progressing_json();
    object["metadata"]["annotations"] = json!({"concurrency.dev/abort": "true"});
    let (out, seen) = control_on(Control::Abort, object, None).await;
    assert_eq!(
        out.unwrap(),
        "storefront-threads: abort already requested; the operator rolls back\n"
    );
    assert_eq!(lines(&seen).len(), 1);
}
