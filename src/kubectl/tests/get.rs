use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::fixtures::*;
use crate::kubectl::cli::GetArgs;
use crate::kubectl::{get, PluginError};

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
        timeout: None,
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
        timeout: None,
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
        timeout: None,
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
        timeout: None,
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
        timeout: None,
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
async fn watching_one_prints_a_line_only_when_the_status_changes() {
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
    get::follow_one(&session, "storefront-threads", None, &mut out)
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
    // The whole view once, then one line for the pause (the annotation alone prints nothing).
    let phases: Vec<&str> = out.lines().filter(|l| l.starts_with("Phase:")).collect();
    assert_eq!(phases, ["Phase:       Progressing"], "{out}");
    let changes: Vec<&str> = out.lines().filter(|l| l.starts_with("» ")).collect();
    assert_eq!(changes.len(), 1, "{out}");
    assert!(
        changes[0].ends_with(
            "  Paused  stage 2/3, weight 70% planned / 67% in force  (Stage 2/3 at 67% of \
             traffic (4 candidate and 2 baseline pods ready); 1 passed analyses in this stage.)"
        ),
        "{out}"
    );
    assert!(
        out.ends_with("\n\nConcurrencyExperiment storefront-threads was deleted.\n"),
        "{out}"
    );
}

#[tokio::test]
async fn watching_one_ends_when_it_has_finished_with_the_analysis_and_the_decision() {
    let mut ended = rolled_back_json();
    ended["metadata"]["resourceVersion"] = json!("102");
    // A record the first view did not have (records are told apart by time and stage).
    ended["status"]["analyses"][0]["at"] = json!("2026-11-30T01:12:00Z");
    let (session, _seen, server) = scripted(vec![
        Exchange::new(
            "GET",
            &exp_path("storefront-threads"),
            200,
            &progressing_json(),
        ),
        Exchange::new(
            "GET",
            EXPERIMENTS,
            200,
            &list_of(vec![progressing_json()], "101"),
        ),
        // No DELETED event: the command ends on the final phase itself.
        Exchange::watch(EXPERIMENTS, &[event("MODIFIED", ended)]),
    ]);
    let mut out = Vec::new();
    get::follow_one(&session, "storefront-threads", None, &mut out)
        .await
        .unwrap();
    server.abort();
    let out = text(out);
    let (_, after) = out.split_once("\n» ").expect(&out);
    let mut lines = after.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .contains("  RolledBack  stage 1/3, weight 30% planned / 0% in force"),
        "{out}"
    );
    assert_eq!(
        lines.next().unwrap(),
        "  2026-11-30T01:12:00Z  stage 1/3  33%  requests 1200 / 590  latency 72ms / 72ms ✓ · queueTime \
         1.7ms / 459.2ms ✗ · memory 194Mi / - ? · gvlWait 0% / 0% ✓  → ✗ Fail",
        "{out}"
    );
    assert_eq!(lines.next().unwrap(), "      failed: queueTime");
    assert_eq!(
        lines.next().unwrap(),
        "      queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms)"
    );
    assert!(
        out.contains(
            "\nDecision: Rollback (CheckFailed) at 2026-11-30T01:05:02Z — Rolling back: 1 failed"
        ),
        "{out}"
    );
    // Then the whole view of the finished experiment.
    let phases: Vec<&str> = out.lines().filter(|l| l.starts_with("Phase:")).collect();
    assert_eq!(
        phases,
        ["Phase:       Progressing", "Phase:       RolledBack"],
        "{out}"
    );
}

#[test]
fn a_follower_is_done_at_a_final_phase_unless_a_retry_is_pending() {
    assert!(!get::finished(&progressing()));
    assert!(get::finished(&rolled_back()));
    let retrying = exp(edited_rolled_back(|v| {
        v["metadata"]["annotations"] = json!({"concurrency.dev/retry": "true"});
    }));
    assert!(!get::finished(&retrying));
    let pending = exp(edited(|v| {
        v.as_object_mut().unwrap().remove("status");
    }));
    assert!(!get::finished(&pending));
}

fn edited_rolled_back(f: impl FnOnce(&mut Value)) -> Value {
    let mut v = rolled_back_json();
    f(&mut v);
    v
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
