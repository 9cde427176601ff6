//! A selection's Deployments: each candidate rendered with its own config and labels, and the
//! fresh baseline as the target's template unchanged.

use std::collections::BTreeMap;

use kube::ResourceExt;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::api::ConcurrencyExperiment;
use crate::workload::*;

/// Two candidates, puma 2×3 and falcon 2, on the storefront.
fn selection() -> ConcurrencyExperiment {
    let mut exp = experiment("sf-select", &puma(2, 4), Some("app"));
    exp.spec.candidate = None;
    exp.spec.candidates = Some(vec![puma(2, 3), falcon(2, None)]);
    exp
}

fn app_env(d: &k8s_openapi::api::apps::v1::Deployment) -> Vec<(String, String)> {
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    env_pairs(&pod.containers[0])
}

fn pod_labels(d: &k8s_openapi::api::apps::v1::Deployment) -> BTreeMap<String, String> {
    let t = &d.spec.as_ref().unwrap().template;
    t.metadata.as_ref().unwrap().labels.clone().unwrap()
}

#[test]
fn each_candidate_runs_its_own_config_under_its_own_name_and_label() {
    let exp = selection();
    let target = storefront();
    let first = selection_variant_deployment(&target, &exp, 0, 1).unwrap();
    let second = selection_variant_deployment(&target, &exp, 1, 2).unwrap();
    assert_eq!(first.name_any(), "storefront-candidate-1");
    assert_eq!(second.name_any(), "storefront-candidate-2");
    assert_eq!(second.spec.as_ref().unwrap().replicas, Some(2));
    assert!(app_env(&first).contains(&("RAILS_MAX_THREADS".into(), "3".into())));
    // Falcon keeps the baseline's pool variable; only Puma's thread variables go.
    assert!(!app_env(&second)
        .iter()
        .any(|(k, _)| k == "PUMA_MAX_THREADS"));
    assert!(app_env(&second).contains(&("WEB_CONCURRENCY".into(), "2".into())));
    let selector = |d: &k8s_openapi::api::apps::v1::Deployment| {
        d.spec
            .as_ref()
            .unwrap()
            .selector
            .match_labels
            .clone()
            .unwrap()
    };
    assert_eq!(
        selector(&first),
        BTreeMap::from([
            ("app".to_string(), "storefront".to_string()),
            ("concurrency.dev/experiment".into(), "sf-select".into()),
            ("concurrency.dev/variant".into(), "candidate-1".into()),
        ])
    );
    // The pods join the target's Service (its labels) and their own selector.
    assert!(selector(&second)
        .iter()
        .all(|(k, v)| pod_labels(&second).get(k) == Some(v)));
    assert_eq!(pod_labels(&second)["tier"], "frontend");
    assert_eq!(first.owner_references()[0].uid, "0b5e-uid");
    // An index the spec no longer has is an error, not a guess.
    assert_eq!(
        selection_variant_deployment(&target, &exp, 2, 1).unwrap_err(),
        WorkloadError::NoSuchCandidate { index: 2 }
    );
}

#[test]
fn the_fresh_baseline_is_the_target_template_unchanged_plus_its_labels() {
    let exp = selection();
    let mut target = storefront();
    let labels = target
        .spec
        .as_mut()
        .unwrap()
        .template
        .metadata
        .as_mut()
        .unwrap();
    labels
        .labels
        .as_mut()
        .unwrap()
        .insert("pod-template-hash".into(), "abc".into());
    let fresh = fresh_baseline_deployment(&target, &exp, 1).unwrap();
    assert_eq!(fresh.name_any(), "storefront-fresh-baseline");
    let (ours, theirs) = (
        &fresh.spec.as_ref().unwrap().template,
        &target.spec.as_ref().unwrap().template,
    );
    // Everything but the labels and the drain is the target's: containers, env, volumes,
    // annotations.
    let mut undrained = ours.spec.clone().unwrap();
    undrained.containers[0].lifecycle = None;
    undrained.termination_grace_period_seconds = None;
    assert_eq!(Some(undrained), theirs.spec);
    assert_eq!(
        ours.metadata.as_ref().unwrap().annotations,
        theirs.metadata.as_ref().unwrap().annotations
    );
    assert_eq!(
        pod_labels(&fresh),
        BTreeMap::from([
            ("app".to_string(), "storefront".to_string()),
            ("tier".into(), "frontend".into()),
            ("concurrency.dev/experiment".into(), "sf-select".into()),
            ("concurrency.dev/variant".into(), "fresh-baseline".into()),
        ])
    );
    assert!(copies_target_template(&fresh, &target));
    // A target changed since (a new image) is no longer what the fresh baseline copies.
    let mut changed = target.clone();
    let pod = changed
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    pod.containers[0].image = Some("ruby-app:2".into());
    assert!(!copies_target_template(&fresh, &changed));
    assert!(!copies_target_template(&target, &target));
}

#[test]
fn after_a_selection_the_candidate_is_the_winner() {
    let mut exp = selection();
    let target = storefront();
    exp.status = Some(crate::api::ConcurrencyExperimentStatus {
        selection: Some(crate::api::SelectionStatus {
            winner: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    });
    let c = candidate_deployment(&target, &exp, 3).unwrap();
    assert_eq!(c.name_any(), "storefront-candidate");
    assert_eq!(
        c.labels()["concurrency.dev/variant"],
        "candidate",
        "the winner walks the stages as the candidate"
    );
    assert!(runs_config(&c, &falcon(2, None), Some("app")));
    assert!(!runs_config(&c, &puma(2, 3), Some("app")));
}

/// The pods the operator creates get a `preStop` sleep of `traffic.drainDelay` (10 s by
/// default) unless the app has its own, and a grace period that still leaves the app its 30 s.
#[test]
fn every_variant_drains_before_it_stops_unless_the_app_has_its_own_pre_stop() {
    let exp = experiment("sf", &puma(2, 4), Some("app"));
    let target = storefront();
    let drain = |d: &k8s_openapi::api::apps::v1::Deployment| {
        let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let sleep = pod.containers[0]
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|p| p.sleep.as_ref())
            .map(|s| s.seconds);
        (sleep, pod.termination_grace_period_seconds)
    };
    let candidate = candidate_deployment(&target, &exp, 2).unwrap();
    assert_eq!(drain(&candidate), (Some(10), Some(40)));
    let fresh = fresh_baseline_deployment(&target, &exp, 1).unwrap();
    assert_eq!(drain(&fresh), (Some(10), Some(40)));

    let mut longer = exp.clone();
    longer.spec.traffic.drain_delay = Some("1m".into());
    assert_eq!(
        drain(&candidate_deployment(&target, &longer, 2).unwrap()),
        (Some(60), Some(90))
    );
    let mut off = exp.clone();
    off.spec.traffic.drain_delay = Some("0s".into());
    assert_eq!(
        drain(&candidate_deployment(&target, &off, 2).unwrap()),
        (None, None)
    );

    // The app's own preStop (it knows its drain) is kept as it is, with its grace period.
    let mut own = target.clone();
    let pod = own.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod.containers[0].lifecycle = Some(
        serde_json::from_value(serde_json::json!(
            {"preStop": {"exec": {"command": ["/bin/drain"]}}}
        ))
        .unwrap(),
    );
    pod.termination_grace_period_seconds = Some(45);
    let c = candidate_deployment(&own, &exp, 2).unwrap();
    let pod = c.spec.unwrap().template.spec.unwrap();
    let pre_stop = pod.containers[0]
        .lifecycle
        .as_ref()
        .unwrap()
        .pre_stop
        .as_ref()
        .unwrap();
    assert!(pre_stop.sleep.is_none() && pre_stop.exec.is_some());
    assert_eq!(pod.termination_grace_period_seconds, Some(45));
}
