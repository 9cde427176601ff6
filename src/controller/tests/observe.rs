use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;

use super::fixtures::{experiment, target};
use crate::api::{ConcurrencyExperiment, ANNOTATION_ABORT, ANNOTATION_APPROVE};
use crate::controller::observe::fetch::{live_on_target, rivals, Fetched};
use crate::controller::observe::observations::*;
use crate::controller::observe::pods::{pod_problem, MAX_PROBLEM};
use crate::workload;
use serde_json::json;

fn fetched(target: Option<Deployment>) -> Fetched {
    Fetched {
        target,
        ..Fetched::default()
    }
}

#[test]
fn abort_comes_from_spec_or_annotation_and_approval_stays_apart() {
    let mut exp = experiment();
    let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
    assert!(!obs.abort_requested && !obs.promotion_approved && !obs.resume_requested);
    exp.metadata.annotations = Some(
        [
            (ANNOTATION_ABORT.to_string(), "True".to_string()),
            (ANNOTATION_APPROVE.to_string(), "yes".to_string()),
        ]
        .into(),
    );
    let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
    assert!(obs.abort_requested, "annotation true (any case) aborts");
    assert!(!obs.resume_requested, "only \"true\" approves");
    // The annotation is the one-shot request; spec.approved approves the promotion only.
    exp.metadata.annotations = Some([(ANNOTATION_APPROVE.to_string(), "true".into())].into());
    let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
    assert!(obs.resume_requested && !obs.promotion_approved);
    exp.metadata.annotations = None;
    exp.spec.approved = true;
    let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
    assert!(obs.promotion_approved && !obs.resume_requested);
}

fn pod(name: &str, status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "status": status})).unwrap()
}

#[test]
fn pod_problems_name_the_first_pod_and_its_reason() {
    let crashing = pod(
        "storefront-candidate-7c9-bbbbb",
        json!({
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{
                "name": "web", "ready": false, "restartCount": 4, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
            }],
        }),
    );
    let ready = pod(
        "storefront-candidate-7c9-aaaaa",
        json!({"conditions": [{"type": "Ready", "status": "True"}]}),
    );
    assert_eq!(
        pod_problem(&[ready.clone(), crashing.clone()]).as_deref(),
        Some(
            "pod storefront-candidate-7c9-bbbbb: container web waiting: CrashLoopBackOff \
             (last terminated: Error, exit code 1)"
        )
    );
    let pulling = pod(
        "storefront-candidate-7c9-ccccc",
        json!({"containerStatuses": [{
            "name": "web", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"x:1\""}},
        }]}),
    );
    let unschedulable = pod(
        "storefront-candidate-7c9-aaaab",
        json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": "0/1 nodes are available: 1 Insufficient memory."}]}),
    );
    let p = pod_problem(&[crashing, pulling.clone(), unschedulable]).unwrap();
    assert_eq!(
        p,
        "3 candidate pods not ready, e.g. pod storefront-candidate-7c9-aaaab: Unschedulable: \
         0/1 nodes are available: 1 Insufficient memory."
    );
    let p = pod_problem(&[pulling]).unwrap();
    assert!(
        p.contains("waiting: ImagePullBackOff (Back-off pulling image \"x:1\")"),
        "{p}"
    );
    assert_eq!(pod_problem(&[ready]), None);
    // Terminating pods are on their way out; a pod with nothing to say is skipped.
    let mut gone = pod(
        "storefront-candidate-7c9-ddddd",
        json!({"phase": "Pending"}),
    );
    assert_eq!(pod_problem(std::slice::from_ref(&gone)), None);
    gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    assert_eq!(pod_problem(&[gone]), None);
}

#[test]
fn long_pod_problems_are_cut() {
    let p = pod(
        "storefront-candidate-7c9-bbbbb",
        json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": "x".repeat(1000)}]}),
    );
    let line = pod_problem(&[p]).unwrap();
    assert_eq!(line.chars().count(), MAX_PROBLEM);
    assert!(line.ends_with('…'));
}

#[test]
fn the_candidate_is_seen_running_the_spec_config_until_the_spec_changes() {
    let mut exp = experiment();
    let t = target(6, 6);
    let mut f = fetched(Some(t.clone()));
    let now = jiff::Timestamp::now();
    assert!(!observations(&exp, &f, now).candidate_runs_spec_config);
    f.candidate = Some(workload::candidate_deployment(&t, &exp, 2).unwrap());
    assert!(observations(&exp, &f, now).candidate_runs_spec_config);
    exp.spec.candidate.as_mut().unwrap().threads = Some(3);
    assert!(!observations(&exp, &f, now).candidate_runs_spec_config);
}

#[test]
fn replicas_weight_is_the_ready_pod_share() {
    let exp = experiment();
    let mut f = fetched(Some(target(4, 4)));
    let mut candidate = target(2, 2);
    candidate.metadata.name = Some("storefront-candidate".into());
    candidate.metadata.owner_references = Some(vec![workload::experiment_owner_ref(&exp).unwrap()]);
    f.candidate = Some(candidate);
    let obs = observations(&exp, &f, jiff::Timestamp::now());
    assert_eq!(obs.effective_weight, 33);
    assert_eq!(obs.target.unwrap().deployment.replicas, 4);
    assert_eq!(obs.candidate.unwrap().ready_replicas, 2);
    assert!(obs.not_ours.is_empty());
}

#[test]
fn the_gateway_split_is_read_from_our_services_even_without_the_users() {
    let exp: ConcurrencyExperiment = {
        let mut e = experiment();
        e.spec.traffic =
            serde_json::from_value(json!({"router": "gatewayAPI", "httpRoute": "storefront"}))
                .unwrap();
        e
    };
    let owner = serde_json::to_value(workload::experiment_owner_ref(&exp).unwrap()).unwrap();
    let ours = |name: &str, variant: &str| -> Service {
        serde_json::from_value(json!({"metadata": {
            "name": name, "namespace": "shop", "ownerReferences": [owner],
            "labels": {workload::LABEL_VARIANT: variant},
        }}))
        .unwrap()
    };
    let route = json!({"metadata": {"namespace": "shop"}, "spec": {"rules": [{"backendRefs": [
        {"name": "web-baseline", "port": 80, "weight": 30},
        {"name": "web-candidate", "port": 80, "weight": 70},
    ]}]}});
    let f = Fetched {
        target: Some(target(6, 6)),
        route: Some(route),
        // The user's Service no longer selects the target (its labels changed).
        service: None,
        services: vec![
            ours("web-baseline", "baseline"),
            ours("web-candidate", "candidate"),
        ],
        ..Fetched::default()
    };
    assert_eq!(
        effective_weight(&exp, &f),
        70,
        "not 0: the route is not restored"
    );
}

#[test]
fn a_candidate_name_taken_by_someone_else_is_not_the_candidate() {
    let exp = experiment();
    let mut f = fetched(Some(target(4, 4)));
    let mut theirs = target(2, 2);
    theirs.metadata.name = Some("storefront-candidate".into());
    // Our labels, even an owner reference to another object: no proof without our UID.
    theirs.labels_mut().insert(
        workload::LABEL_EXPERIMENT.into(),
        "storefront-puma-4".into(),
    );
    let mut other = workload::experiment_owner_ref(&exp).unwrap();
    other.uid = "someone-else".into();
    theirs.metadata.owner_references = Some(vec![other]);
    f.candidate = Some(theirs);
    let obs = observations(&exp, &f, jiff::Timestamp::now());
    assert_eq!(obs.candidate, None);
    assert_eq!(obs.effective_weight, 0, "its pods are not the candidate's");
    assert_eq!(obs.not_ours, ["Deployment storefront-candidate"]);
}

#[test]
fn a_target_whose_app_container_is_gone_is_still_the_target() {
    let mut t = target(3, 1);
    let before = template_hash(&t);
    assert_eq!(before, template_hash(&target(3, 1)), "stable");
    let pod = t.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod.containers[0].name = "app".into();
    let obs = observations(&experiment(), &fetched(Some(t)), jiff::Timestamp::now());
    let seen = obs
        .target
        .expect("observed, so that a rollback restores it");
    assert_eq!(seen.baseline, None);
    assert_eq!(
        (seen.deployment.replicas, seen.deployment.ready_replicas),
        (3, 1)
    );
    assert_ne!(seen.template_hash, before);
    assert!(obs.spec_error.unwrap().starts_with("spec.container"));
}

#[test]
fn spec_errors_name_the_field() {
    let mut exp = experiment();
    exp.spec.container = Some("app".into());
    let err = spec_error(&exp, &fetched(Some(target(6, 6)))).unwrap();
    assert!(err.starts_with("spec.container"), "{err}");

    let mut t = target(6, 6);
    let spec = t.spec.as_mut().unwrap();
    spec.selector.match_labels = None;
    spec.selector.match_expressions = Some(vec![serde_json::from_value(
        json!({"key": "app", "operator": "In", "values": ["storefront"]}),
    )
    .unwrap()]);
    let err = spec_error(&experiment(), &fetched(Some(t))).unwrap();
    assert!(err.contains("matchExpressions"), "{err}");
    assert_eq!(
        spec_error(&experiment(), &fetched(Some(target(6, 6)))),
        None
    );
}

#[test]
fn a_selection_and_a_fresh_baseline_are_valid_specs() {
    let mut exp = experiment();
    exp.spec.baseline = Some(crate::api::BaselineSpec { fresh: true });
    assert_eq!(spec_error(&exp, &fetched(Some(target(6, 6)))), None);
    let mut exp = experiment();
    let one = exp.spec.candidate.take().unwrap();
    let mut two = one.clone();
    two.threads = Some(3);
    exp.spec.candidates = Some(vec![one, two]);
    assert_eq!(spec_error(&exp, &fetched(Some(target(6, 6)))), None);
}

#[test]
fn only_an_older_live_experiment_on_the_same_target_is_a_rival() {
    let first = experiment();
    let mut later = experiment();
    later.metadata.name = Some("later".into());
    later.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-30T02:00:00Z".parse().unwrap(),
    ));
    let all = [Arc::new(first.clone()), Arc::new(later.clone())];
    assert_eq!(rivals(&all, &later), ["storefront-puma-4"]);
    assert!(rivals(&all, &first).is_empty());
    // A retry of the older one must wait for the later one.
    assert_eq!(live_on_target(&all, &first), ["later"]);
    assert_eq!(live_on_target(&all, &later), ["storefront-puma-4"]);

    let mut finished = first;
    finished.status = Some(crate::api::ConcurrencyExperimentStatus {
        phase: crate::api::Phase::RolledBack,
        ..Default::default()
    });
    assert!(rivals(&[Arc::new(finished)], &later).is_empty());
}
