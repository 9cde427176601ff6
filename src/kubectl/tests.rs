//! The plugin's commands: exact output of the renderers, and every command against a scripted
//! API server (the exact calls, their bodies, and the one-line errors).

use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cli::{GetArgs, InitArgs, InitServer, RecommendArgs};
use super::control::{self, Control};
use super::fixtures::*;
use super::history::history_text;
use super::render::{experiment_detail, experiment_list};
use super::{get, init, recommend, PluginError};
use crate::api::ConcurrencyExperiment;

fn now() -> Timestamp {
    "2026-11-30T01:12:30Z".parse().unwrap()
}

fn exp(v: Value) -> ConcurrencyExperiment {
    serde_json::from_value(v).unwrap()
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap()
}

const PROGRESSING_DETAIL: &str = "\
Name:        storefront-threads
Namespace:   shop
Target:      Deployment storefront, container web
Phase:       Progressing
Stage:       2/3, weight 70% planned / 67% in force
Message:     Stage 2/3 at 67% of traffic (4 candidate and 2 baseline pods ready); 1 passed analyses in this stage.
Baseline:    puma 2×6 — Deployment storefront, 2/2 ready
Candidate:   puma 2×4 — Deployment storefront-candidate, 4/4 ready
Analyses:    0 failed (failureLimit 1), 1 inconclusive (inconclusiveLimit 3)

Latest analysis: 2026-11-30T01:11:00Z (90s ago), stage 2/3, weight 67%, requests baseline 800 / candidate 1650
  CHECK      BASELINE  CANDIDATE  LIMIT                       VERDICT
  latency    72ms      73ms       max 500ms, maxIncrease 10%  ✓ Pass
  queueTime  1.7ms     1.9ms      max 50ms                    ✓ Pass
  memory     210Mi     195Mi      maxIncrease 20%             ✓ Pass
  gvlWait    0%        1.3%       max 15%                     ✓ Pass
  Verdict: ✓ Pass — all 4 checks passed (requests: baseline 800, candidate 1650)

Decision:       none yet
Recommendation: I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)
";

#[test]
fn the_detail_shows_stage_weights_the_latest_analysis_and_the_recommendation() {
    assert_eq!(experiment_detail(&progressing(), now()), PROGRESSING_DETAIL);
}

#[test]
fn a_rolled_back_experiment_shows_the_failed_check_its_reason_and_the_decision() {
    assert_eq!(
        experiment_detail(&rolled_back(), now()),
        "\
Name:        storefront-threads
Namespace:   shop
Target:      Deployment storefront, container web
Phase:       RolledBack
Stage:       1/3, weight 30% planned / 0% in force
Message:     Rolled back: the baseline serves all traffic again.
Baseline:    puma 2×6 — Deployment storefront, 2/2 ready
Candidate:   puma 2×4 — Deployment storefront-candidate, 0/0 ready
Analyses:    1 failed (failureLimit 0), 0 inconclusive (inconclusiveLimit 3)
Retry:       `kubectl concurrency retry storefront-threads` starts again from stage 1

Latest analysis: 2026-11-30T01:05:00Z (7m30s ago), stage 1/3, weight 33%, requests baseline 1200 / candidate 590
  CHECK      BASELINE  CANDIDATE  LIMIT                       VERDICT
  latency    72ms      72ms       max 500ms, maxIncrease 10%  ✓ Pass
  queueTime  1.7ms     459.2ms    max 50ms                    ✗ Fail
  memory     194Mi     -          maxIncrease 20%             ? Inconclusive
  gvlWait    0%        0%         max 15%                     ✓ Pass
  Verdict: ✗ Fail — failed: queueTime
  queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms)
  memory: no data for the candidate

Decision:       Rollback (CheckFailed) at 2026-11-30T01:05:02Z — Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).
Recommendation: I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)
"
    );
}

#[test]
fn holds_and_pauses_name_the_command_that_continues() {
    let held = exp(edited(|v| {
        v["spec"]["promotion"] = json!("manual");
        v["spec"]["paused"] = json!(true);
        let s = &mut v["status"];
        s["phase"] = json!("Paused");
        s["holdReason"] = json!("AwaitingApproval");
        s["analyses"] = json!([]);
        s.as_object_mut().unwrap().remove("recommendation");
    }));
    let text = experiment_detail(&held, now());
    assert!(
        text.contains(
            "Hold:        AwaitingApproval — all stages passed; `kubectl concurrency approve storefront-threads` promotes\n\
             Paused:      spec.paused — `kubectl concurrency resume storefront-threads` continues\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nLatest analysis: none yet\n"), "{text}");
    assert!(
        text.contains("\nRecommendation: none yet (needs the I/O counters)\n"),
        "{text}"
    );
    let new = exp(edited(|v| {
        v.as_object_mut().unwrap().remove("status");
    }));
    let text = experiment_detail(&new, now());
    assert!(
        text.contains("Phase:       Pending (not yet seen by the operator)\n"),
        "{text}"
    );
    assert!(
        text.contains("Candidate:   puma 2×4 (not deployed)\n"),
        "{text}"
    );
}

#[test]
fn the_list_has_one_line_per_experiment() {
    let mut other = rolled_back_json();
    other["metadata"]["name"] = json!("storefront-1x1");
    other["metadata"]["creationTimestamp"] = json!("2026-11-28T23:00:00Z");
    let mut held = progressing_json();
    held["metadata"]["name"] = json!("storefront-manual");
    held["status"]["phase"] = json!("Paused");
    held["status"]["holdReason"] = json!("InconclusiveLimit");
    assert_eq!(
        experiment_list(&[progressing(), exp(other), exp(held)], now()),
        "\
NAME                TARGET      PHASE                       STAGE  PLANNED  IN FORCE  VERDICT  BASELINE  CANDIDATE  DECISION                AGE
storefront-threads  storefront  Progressing                 2/3    70%      67%       Pass     puma 2×6  puma 2×4   -                       12m
storefront-1x1      storefront  RolledBack                  1/3    30%      0%        Fail     puma 2×6  puma 2×4   Rollback (CheckFailed)  26h
storefront-manual   storefront  Paused (InconclusiveLimit)  2/3    70%      67%       Pass     puma 2×6  puma 2×4   -                       12m
"
    );
}

#[test]
fn history_shows_every_kept_analysis_and_why_some_did_not_pass() {
    assert_eq!(
        history_text(&progressing()),
        "\
storefront-threads: 3 analyses kept in status (the operator keeps the newest 10); in the whole experiment 0 failed (failureLimit 1), 1 inconclusive (inconclusiveLimit 3)
Limits: latency max 500ms, maxIncrease 10%; queueTime max 50ms; memory maxIncrease 20%; gvlWait max 15%

TIME                  STAGE  WEIGHT  REQUESTS (BASE / CAND)  latency (base / cand)  queueTime (base / cand)  memory (base / cand)  gvlWait (base / cand)  VERDICT
2026-11-30T01:05:00Z  1/3    33%     1200 / 600              72ms / 73ms ✓          1.7ms / 1.8ms ✓          210Mi / 194Mi ✓       0% / 1.2% ✓            Pass
2026-11-30T01:06:00Z  1/3    33%     1190 / 20               71ms / 74ms ✓          1.6ms / - ?              210Mi / 194Mi ✓       0% / 1.1% ✓            Inconclusive
2026-11-30T01:11:00Z  2/3    67%     800 / 1650              72ms / 73ms ✓          1.7ms / 1.9ms ✓          210Mi / 195Mi ✓       0% / 1.3% ✓            Pass

Why not Pass:
  2026-11-30T01:06:00Z Inconclusive: too few requests in the interval: baseline 1190, candidate 20 (minRequests 50)
    queueTime: no data for the candidate

Decision: none yet (phase Progressing)
"
    );
    assert_eq!(
        history_text(&rolled_back()),
        "\
storefront-threads: 1 analysis kept in status (the operator keeps the newest 10); in the whole experiment 1 failed (failureLimit 0), 0 inconclusive (inconclusiveLimit 3)
Limits: latency max 500ms, maxIncrease 10%; queueTime max 50ms; memory maxIncrease 20%; gvlWait max 15%

TIME                  STAGE  WEIGHT  REQUESTS (BASE / CAND)  latency (base / cand)  queueTime (base / cand)  memory (base / cand)  gvlWait (base / cand)  VERDICT
2026-11-30T01:05:00Z  1/3    33%     1200 / 590              72ms / 72ms ✓          1.7ms / 459.2ms ✗        194Mi / - ?           0% / 0% ✓              Fail

Why not Pass:
  2026-11-30T01:05:00Z Fail: failed: queueTime
    queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms)
    memory: no data for the candidate

Decision: Rollback (CheckFailed) at 2026-11-30T01:05:02Z — Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).
"
    );
    let empty = exp(edited(|v| {
        v["status"]["analyses"] = json!([]);
    }));
    assert!(history_text(&empty).contains("\nNo analyses yet.\n"));
}

// ---- get against the API ----

#[tokio::test]
async fn get_reads_one_experiment() {
    let (session, seen, server) = scripted(vec![Exchange::new(
        "GET",
        &exp_path("storefront-threads"),
        200,
        &progressing_json(),
    )]);
    let mut out = Vec::new();
    let args = GetArgs {
        name: Some("storefront-threads".into()),
        watch: false,
    };
    get::run(&session, &args, &mut out).await.unwrap();
    server.abort();
    assert_eq!(
        lines(&seen),
        [format!("GET {}", exp_path("storefront-threads"))]
    );
    let out = text(out);
    // Everything but the age, which depends on the clock.
    let (head, _) = PROGRESSING_DETAIL.split_once("Latest analysis").unwrap();
    assert!(out.starts_with(head), "{out}");
    assert!(out.contains("  queueTime  1.7ms     1.9ms      max 50ms                    ✓ Pass\n"));
}

#[tokio::test]
async fn get_of_a_missing_experiment_is_one_clear_line() {
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &exp_path("nope"),
        404,
        &not_found("nope"),
    )]);
    let args = GetArgs {
        name: Some("nope".into()),
        watch: false,
    };
    let e = get::run(&session, &args, &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert!(matches!(e, PluginError::NotFound { .. }));
    assert_eq!(
        e.to_string(),
        r#"ConcurrencyExperiment "nope" not found in namespace "shop""#
    );
}

#[tokio::test]
async fn get_without_the_crd_says_so() {
    // A resource type the API server does not know: a bare 404, no object named.
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        EXPERIMENTS,
        404,
        &status(
            404,
            "NotFound",
            "the server could not find the requested resource",
            None,
        ),
    )]);
    let args = GetArgs {
        name: None,
        watch: false,
    };
    let e = get::run(&session, &args, &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        "the ConcurrencyExperiment CRD is not installed in this cluster (kubectl apply -f crds/, or install the Helm chart)"
    );
}

#[tokio::test]
async fn get_denied_by_rbac_names_the_verb_and_namespace() {
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &exp_path("storefront-threads"),
        403,
        &forbidden("get", "storefront-threads"),
    )]);
    let args = GetArgs {
        name: Some("storefront-threads".into()),
        watch: false,
    };
    let e = get::run(&session, &args, &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        "permission denied (403, RBAC): cannot get concurrencyexperiments in namespace \"shop\": \
         concurrencyexperiments.concurrency.dev \"storefront-threads\" is forbidden: User \"dev\" \
         cannot get resource \"concurrencyexperiments\" in API group \"concurrency.dev\" in the \
         namespace \"shop\""
    );
    assert!(!e.to_string().contains('\n'));
}

#[tokio::test]
async fn get_lists_the_namespace_sorted_by_name() {
    let mut other = rolled_back_json();
    other["metadata"]["name"] = json!("a-first");
    let list = json!({
        "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperimentList",
        "metadata": {"resourceVersion": "300"}, "items": [progressing_json(), other],
    });
    let (session, seen, server) = scripted(vec![Exchange::new("GET", EXPERIMENTS, 200, &list)]);
    let mut out = Vec::new();
    let args = GetArgs {
        name: None,
        watch: false,
    };
    get::run(&session, &args, &mut out).await.unwrap();
    server.abort();
    assert_eq!(lines(&seen), [format!("GET {EXPERIMENTS}")]);
    let out = text(out);
    let names: Vec<&str> = out.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(names, ["NAME", "a-first", "storefront-threads"]);
    let empty = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []});
    let (session, _, server) = scripted(vec![Exchange::new("GET", EXPERIMENTS, 200, &empty)]);
    let mut out = Vec::new();
    get::run(&session, &args, &mut out).await.unwrap();
    server.abort();
    assert_eq!(text(out), "No experiments in namespace shop.\n");
}

fn list_of(items: Vec<Value>, rv: &str) -> Value {
    json!({
        "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperimentList",
        "metadata": {"resourceVersion": rv}, "items": items,
    })
}

fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

#[tokio::test]
async fn watching_one_prints_again_only_when_the_status_changes() {
    let paused = edited(|v| {
        v["metadata"]["resourceVersion"] = json!("102");
        v["spec"]["paused"] = json!(true);
        v["status"]["phase"] = json!("Paused");
    });
    let mut annotated = paused.clone();
    annotated["metadata"]["resourceVersion"] = json!("103");
    annotated["metadata"]["annotations"] = json!({"note": "status unchanged"});
    let (session, seen, server) = scripted(vec![
        Exchange::new(
            "GET",
            &exp_path("storefront-threads"),
            200,
            &progressing_json(),
        ),
        // The watcher's list, then its watch from that list's resourceVersion.
        Exchange::new(
            "GET",
            EXPERIMENTS,
            200,
            &list_of(vec![progressing_json()], "101"),
        ),
        Exchange::watch(
            EXPERIMENTS,
            &[
                event("MODIFIED", paused),
                event("MODIFIED", annotated.clone()),
                event("DELETED", annotated),
            ],
        ),
    ]);
    let mut out = Vec::new();
    get::follow_one(&session, "storefront-threads", &mut out)
        .await
        .unwrap();
    server.abort();
    let calls = seen.lock().unwrap().clone();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert!(
        calls[1]
            .query
            .contains("fieldSelector=metadata.name%3Dstorefront-threads"),
        "{}",
        calls[1].query
    );
    assert!(calls[2].query.contains("watch=true"), "{}", calls[2].query);
    assert!(
        calls[2].query.contains("resourceVersion=101"),
        "{}",
        calls[2].query
    );
    let out = text(out);
    let phases: Vec<&str> = out.lines().filter(|l| l.starts_with("Phase:")).collect();
    assert_eq!(
        phases,
        ["Phase:       Progressing", "Phase:       Paused"],
        "{out}"
    );
    assert!(
        out.ends_with("\n\nConcurrencyExperiment storefront-threads was deleted.\n"),
        "{out}"
    );
}

#[tokio::test]
async fn watching_the_namespace_prints_a_line_per_change_and_stops_on_a_denial() {
    let mut other = rolled_back_json();
    other["metadata"]["name"] = json!("a-first");
    let promoting = edited(|v| {
        v["metadata"]["resourceVersion"] = json!("402");
        v["status"]["phase"] = json!("Promoting");
    });
    let mut relabelled = promoting.clone();
    relabelled["metadata"]["labels"] = json!({"team": "shop"});
    let (session, _, server) = scripted(vec![
        Exchange::new(
            "GET",
            EXPERIMENTS,
            200,
            &list_of(vec![progressing_json(), other.clone()], "400"),
        ),
        Exchange::watch(
            EXPERIMENTS,
            &[
                event("MODIFIED", promoting),
                event("MODIFIED", relabelled),
                event("DELETED", other),
            ],
        ),
        Exchange::new(
            "GET",
            EXPERIMENTS,
            403,
            &forbidden("watch", "storefront-threads"),
        ),
    ]);
    let mut out = Vec::new();
    let e = get::follow_all(&session, &mut out).await.unwrap_err();
    server.abort();
    assert!(
        matches!(e, PluginError::Forbidden { verb: "watch", .. }),
        "{e}"
    );
    let out = text(out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].starts_with("NAME "), "{out}");
    assert!(lines[1].starts_with("a-first "), "{out}");
    assert!(
        lines[2].starts_with("storefront-threads  storefront  Progressing"),
        "{out}"
    );
    // The change lines line up with the table.
    assert!(
        lines[3].starts_with("storefront-threads  storefront  Promoting  "),
        "{out}"
    );
    assert_eq!(lines[3].find("2/3"), lines[2].find("2/3"), "{out}");
    assert_eq!(lines[4], "a-first deleted");
}

// ---- control commands ----

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
         holdReason InconclusiveLimit or AwaitingApproval) or the manual promotion at the last \
         stage — nothing to approve"
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
         again at stage 1 and removes the annotation\n"
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
        "storefront-threads: is Progressing at stage 2/3; only a RolledBack experiment can be retried"
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
        "storefront-threads: paused (spec.paused: true) at stage 2/3; analyses keep running and \
         can still roll back\n"
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
        "storefront-threads: resumed (spec.paused: false)\n"
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

// ---- recommend ----

fn target(cpu_limit: Option<f64>) -> recommend::Target {
    recommend::Target {
        deployment: "storefront".into(),
        namespace: "shop".into(),
        container: "web".into(),
        config: crate::api::RenderedServer {
            server: crate::api::ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..Default::default()
        },
        replicas: 3,
        ready: 3,
        cpu_limit,
    }
}

fn settings() -> recommend::ReportSettings {
    recommend::ReportSettings {
        prometheus: "http://prometheus.monitoring:9090".into(),
        window: std::time::Duration::from_secs(300),
        min_gain: 0.05,
        async_above: 0.95,
    }
}

#[test]
fn the_recommendation_report_has_the_amdahl_table_and_the_capacity_per_thread_count() {
    let t = target(None);
    let queries =
        recommend::queries(&t, &Default::default(), std::time::Duration::from_secs(300)).unwrap();
    let m = recommend::Measurement {
        io_share: Some(0.52),
        cpu: Some(0.076),
        io: Some(0.104),
        busiest_pod_rate: Some(12.0),
    };
    let (report, missing) = recommend::report(&t, &m, &queries, &settings());
    assert!(missing.is_empty());
    assert_eq!(
        report,
        format!(
            "\
Deployment storefront in namespace shop, container web: puma 2×6 (3/3 ready), CPU limit none
Measured over the last 5m from http://prometheus.monitoring:9090:
  I/O share p      52.0%       io / (running + io + gvlWait)
  CPU per request  76ms        running (GVL held) seconds per request
  I/O per request  104ms       I/O wait seconds per request
  busiest pod      12.0 req/s  requests per second

{}
Capacity per pod at 76ms CPU + 104ms I/O per request, 2 workers:
a Puma worker with t threads ≈ min(t / (cpu + io), 1 / cpu), a Falcon worker ≈ 1 / cpu; the pod = workers × that, capped by the CPU limit (limit / cpu)
SERVER  THREADS  PER WORKER  PER POD     BOUND    HEADROOM
puma    1        5.6 req/s   11.1 req/s  threads  -8%
puma    2        11.1 req/s  22.2 req/s  threads  46%
puma    3        13.2 req/s  26.3 req/s  GVL      54%
puma    4        13.2 req/s  26.3 req/s  GVL      54%       ← recommended (Amdahl)
puma    5        13.2 req/s  26.3 req/s  GVL      54%
puma    6        13.2 req/s  26.3 req/s  GVL      54%       ← now
puma    7        13.2 req/s  26.3 req/s  GVL      54%
puma    8        13.2 req/s  26.3 req/s  GVL      54%
falcon  -        13.2 req/s  26.3 req/s  GVL      54%
Headroom = 1 − busiest pod's rate (12.0 req/s) / capacity; negative: the pod serves more than the estimate.
",
            crate::analysis::recommendation_table(0.52, 0.05, 0.95)
        )
    );
    // A CPU limit of 1.5 cores caps every pod at 1.5 / 76ms = 19.7 req/s.
    let (report, _) = recommend::report(&target(Some(1.5)), &m, &queries, &settings());
    assert!(report.contains("CPU limit 1.5 cores\n"), "{report}");
    assert!(
        report.contains("puma    2        11.1 req/s  19.7 req/s  CPU limit  39%\n"),
        "{report}"
    );
}

#[test]
fn missing_data_names_the_query_that_returned_nothing() {
    let t = target(None);
    let queries =
        recommend::queries(&t, &Default::default(), std::time::Duration::from_secs(300)).unwrap();
    let m = recommend::Measurement {
        io_share: Some(0.52),
        cpu: None,
        io: Some(0.104),
        busiest_pod_rate: None,
    };
    let (report, missing) = recommend::report(&t, &m, &queries, &settings());
    assert_eq!(missing, ["CPU per request", "busiest pod rate"]);
    assert!(report.contains("  CPU per request  no data"), "{report}");
    assert!(
        report.contains("\nCapacity: needs CPU and I/O per request.\n"),
        "{report}"
    );
    assert!(
        report.ends_with(
            "\nNo data (the query returned nothing, or NaN for no requests):\n  \
             CPU per request: sum(rate(ruby_running_seconds_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m])) \
             / sum(rate(rails_requests_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m]))\n  \
             busiest pod rate: max(sum by (pod) (rate(rails_requests_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m])))\n"
        ),
        "{report}"
    );
}

fn recommend_args(url: &str) -> RecommendArgs {
    RecommendArgs {
        deployment: "storefront".into(),
        prometheus: url.into(),
        container: Some("web".into()),
        window: std::time::Duration::from_secs(300),
        min_gain: 0.05,
        async_above: 0.95,
        metrics: Vec::new(),
        timeout: std::time::Duration::from_secs(5),
    }
}

#[tokio::test]
async fn recommend_reads_the_deployment_and_asks_prometheus() {
    let (url, queries) = canned_prometheus(vec![
        // Only the I/O share query names the GVL counter; match it first.
        ("ruby_gvl_wait_seconds_total", Some(0.52)),
        ("ruby_running_seconds_total", Some(0.076)),
        ("ruby_io_wait_seconds_total", Some(0.104)),
        ("max(sum by (pod)", None),
    ])
    .await;
    let (session, seen, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(Some("1500m")),
    )]);
    let e = recommend::run(&session, &recommend_args(&url), &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(lines(&seen), [format!("GET {DEPLOYMENTS}/storefront")]);
    assert_eq!(
        e.to_string(),
        "no data from Prometheus for busiest pod rate: see the queries above (is the exporter \
         scraped, and did the pods serve requests in the window?)"
    );
    let report = e.partial_output().unwrap();
    // Read back from container web (not the sidecar listed first): puma 2×6, 1.5 cores.
    assert!(
        report.starts_with(
            "Deployment storefront in namespace shop, container web: puma 2×6 (3/3 ready), CPU limit 1.5 cores\n"
        ),
        "{report}"
    );
    assert!(
        report.contains("puma    6        13.2 req/s  19.7 req/s  CPU limit  -         ← now\n"),
        "{report}"
    );
    let queries = queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 4, "{queries:#?}");
    assert!(
        queries
            .iter()
            .all(|q| q.contains(r#"namespace="shop",pod=~"^storefront-["#)),
        "{queries:#?}"
    );
}

#[tokio::test]
async fn recommend_for_a_missing_deployment_or_a_dead_prometheus_fails_clearly() {
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        404,
        &status(
            404,
            "NotFound",
            "deployments.apps \"storefront\" not found",
            Some("storefront"),
        ),
    )]);
    let e = recommend::run(
        &session,
        &recommend_args("http://127.0.0.1:9"),
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        r#"Deployment "storefront" not found in namespace "shop""#
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let e = recommend::run(
        &session,
        &recommend_args(&format!("http://127.0.0.1:{port}")),
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert!(
        e.to_string().starts_with("Prometheus is unreachable: "),
        "{e}"
    );
    let mut args = recommend_args("http://127.0.0.1:9");
    args.container = Some("app".into());
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let e = recommend::run(&session, &args, &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        "spec.container: container \"app\" not found in Deployment storefront (containers: sidecar, web)"
    );
}

// ---- init ----

/// What the API server would do with the manifest: the CRD's schema and CEL rules, then the
/// operator's own validation of what the schema cannot express.
fn assert_valid(yaml: &str) -> ConcurrencyExperiment {
    use kube::CustomResourceExt;
    let object: Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(yaml).unwrap()).unwrap();
    let crd = serde_json::to_value(ConcurrencyExperiment::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&object)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{yaml}");
    kube::core::cel::Validator::new()
        .validate(schema, &object, None)
        .unwrap_or_else(|e| panic!("CEL: {:?}\n{yaml}", e.into_vec()));
    let exp: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
    crate::plan::validate(&exp.spec, None).unwrap();
    crate::analysis::validate(&exp.spec.analysis).unwrap();
    exp
}

fn init_args(server: InitServer, threads: Option<i32>, workers: Option<i32>) -> InitArgs {
    InitArgs {
        deployment: "storefront".into(),
        server,
        threads,
        workers,
        prometheus: None,
        container: None,
        name: None,
    }
}

fn puma_2x6() -> crate::api::RenderedServer {
    crate::api::RenderedServer {
        server: crate::api::ServerKind::Puma,
        workers: Some(2),
        threads: Some(6),
        ..Default::default()
    }
}

fn starting(candidate: crate::api::ServerConfig, data: Option<Vec<bool>>) -> init::Starting {
    init::Starting {
        name: init::default_name("storefront", &candidate),
        namespace: "shop".into(),
        deployment: "storefront".into(),
        container: "web".into(),
        baseline: puma_2x6(),
        candidate,
        prometheus: data
            .as_ref()
            .map(|_| "http://prometheus.monitoring:9090".to_string()),
        data,
    }
}

#[test]
fn init_writes_a_valid_starter_with_the_current_config_as_a_comment() {
    let candidate =
        init::candidate(&init_args(InitServer::Puma, Some(4), None), &puma_2x6()).unwrap();
    let yaml = init::manifest(&starting(candidate, None));
    assert_eq!(
        yaml,
        r#"# Starter ConcurrencyExperiment for Deployment storefront in namespace shop.
# The target runs now (read back from container web): puma 2×6
# Candidate: puma 2×4. Review stages and checks, then: kubectl apply -f FILE
apiVersion: concurrency.dev/v1alpha1
kind: ConcurrencyExperiment
metadata:
  name: "storefront-puma-2x4"
  namespace: "shop"
spec:
  targetRef:
    name: "storefront"
  container: "web"
  candidate:
    server: puma
    workers: 2
    threads: 4
  traffic:
    router: replicas   # candidate pods join the target's Service; or gatewayAPI + httpRoute
  stages:
    - {weight: 30, duration: 10m}
    - {weight: 70, duration: 10m}
    - {weight: 100, duration: 10m}
  analysis:
    prometheus:
      url: "http://prometheus.monitoring:9090"   # placeholder: your Prometheus (or pass --prometheus)
    interval: 1m
    failureLimit: 1
    inconclusiveLimit: 3
    minRequests: 50
    checks:
      # p99 request duration at most 10% above the baseline's in the same interval
      - {metric: latency, quantile: 0.99, maxIncrease: "10%"}
      # working set per pod at most 20% above the baseline's (memory grows with workers and threads)
      - {metric: memory, maxIncrease: "20%"}
      # share of request time spent waiting for the GVL: too many threads per process
      - {metric: gvlWait, max: "15%"}
      # share of 5xx responses
      - {metric: errorRate, max: "1%"}
      # time requests wait for a free thread; needs X-Request-Start from the load balancer
      # - {metric: queueTime, quantile: 0.9, max: 50ms, maxIncrease: "50%"}   # enable once your app exports it (pass --prometheus to check)
  promotion: auto   # or manual: hold at the last stage until `kubectl concurrency approve`
"#
    );
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    assert_eq!(names, ["latency", "memory", "gvlWait", "errorRate"]);
    assert_eq!(exp.spec.candidate.summary(), "puma 2×4");
    assert_eq!(exp.metadata.name.as_deref(), Some("storefront-puma-2x4"));
}

#[test]
fn init_for_falcon_has_no_thread_checks_and_probed_checks_follow_the_data() {
    let args = init_args(InitServer::Falcon, None, Some(3));
    let candidate = init::candidate(&args, &puma_2x6()).unwrap();
    // Probed: latency, memory, errorRate, queueTime (no gvlWait for Falcon); memory had no data.
    let yaml = init::manifest(&starting(candidate, Some(vec![true, false, true, true])));
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    assert_eq!(names, ["latency", "errorRate", "queueTime"]);
    assert_eq!(exp.metadata.name.as_deref(), Some("storefront-falcon-3"));
    assert!(
        yaml.contains("    server: falcon\n    workers: 3\n    # falcon: {mode: host}"),
        "{yaml}"
    );
    assert!(
        yaml.contains(r#"      # - {metric: memory, maxIncrease: "20%"}   # no data in Prometheus for the target's pods"#),
        "{yaml}"
    );
    assert!(!yaml.contains("placeholder"), "{yaml}");
    // Nothing had data: the unprobed defaults stay on, with a warning.
    let candidate = init::candidate(&args, &puma_2x6()).unwrap();
    let yaml = init::manifest(&starting(candidate, Some(vec![false; 4])));
    assert!(yaml.contains("# WARNING: no check had data"), "{yaml}");
    let exp = assert_valid(&yaml);
    assert_eq!(exp.spec.analysis.checks.len(), 3);
}

#[test]
fn init_refuses_what_would_not_be_an_experiment() {
    let same = init::candidate(&init_args(InitServer::Puma, Some(6), None), &puma_2x6());
    assert_eq!(
        same.unwrap_err().to_string(),
        "the target already runs puma 2×6: choose another config"
    );
    let e = init::candidate(&init_args(InitServer::Puma, None, Some(2)), &puma_2x6()).unwrap_err();
    assert_eq!(e.to_string(), "--threads N is needed for a puma candidate");
    let e = init::candidate(
        &init_args(InitServer::Falcon, Some(4), Some(2)),
        &puma_2x6(),
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("--threads is for puma only"),
        "{e}"
    );
    // A new worker count, same threads, is a different config.
    let c = init::candidate(&init_args(InitServer::Puma, Some(6), Some(3)), &puma_2x6()).unwrap();
    assert_eq!(c.summary(), "puma 3×6");
    assert_eq!(init::default_name(&"x".repeat(260), &c).len(), 253);
}

#[tokio::test]
async fn init_reads_the_target_and_probes_each_check_query() {
    let (url, queries) = canned_prometheus(vec![
        ("rails_request_queue_time_seconds", None),
        ("ruby_gvl_wait_seconds_total", Some(0.01)),
        ("rails_request_duration_seconds_bucket", Some(0.2)),
        ("container_memory_working_set_bytes", Some(2e8)),
        ("rails_requests_total", Some(0.0)),
    ])
    .await;
    let (session, seen, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let mut args = init_args(InitServer::Puma, Some(4), None);
    args.prometheus = Some(url.clone());
    args.container = Some("web".into());
    let mut out = Vec::new();
    init::run(&session, &args, &mut out).await.unwrap();
    server.abort();
    assert_eq!(lines(&seen), [format!("GET {DEPLOYMENTS}/storefront")]);
    let yaml = text(out);
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    assert_eq!(names, ["latency", "memory", "gvlWait", "errorRate"]);
    assert_eq!(exp.spec.analysis.prometheus.url, url);
    assert!(
        yaml.contains("# The target runs now (read back from container web): puma 2×6\n"),
        "{yaml}"
    );
    assert!(yaml.contains("# - {metric: queueTime"), "{yaml}");
    // The operator's queries for the baseline's pods, memory for container web.
    let queries = queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 5, "{queries:#?}");
    assert!(
        queries
            .iter()
            .all(|q| q.contains(r#"namespace="shop",pod=~"^storefront-["#)),
        "{queries:#?}"
    );
    assert!(
        queries.iter().any(|q| q.contains(r#"container="web""#)),
        "{queries:#?}"
    );
}
