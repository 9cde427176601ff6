//! The candidate Deployment, promotion and rollout state.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use kube::ResourceExt;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::api::{RenderedServer, ServerConfig};
use crate::workload::*;

#[test]
fn candidate_deployment_joins_the_target_selector_with_its_own_labels() {
    let exp = experiment("sf-threads", &puma(2, 4), None);
    let mut target = storefront();
    let template = &mut target.spec.as_mut().unwrap().template;
    template
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert("pod-template-hash".into(), "abc".into());
    let c = candidate_deployment(&target, &exp, 2).unwrap();

    assert_eq!(c.metadata.name.as_deref(), Some("storefront-candidate"));
    assert_eq!(c.metadata.namespace.as_deref(), Some(NAMESPACE));
    let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.api_version.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        (
            "ConcurrencyExperiment",
            "concurrency.dev/v1alpha1",
            "sf-threads",
            "0b5e-uid"
        )
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );

    let spec = c.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let selector = BTreeMap::from([
        ("app".to_string(), "storefront".to_string()),
        (
            "concurrency.dev/experiment".to_string(),
            "sf-threads".to_string(),
        ),
        (
            "concurrency.dev/variant".to_string(),
            "candidate".to_string(),
        ),
    ]);
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&selector));
    let meta = spec.template.metadata.as_ref().unwrap();
    let mut pod_labels = selector.clone();
    pod_labels.insert("tier".into(), "frontend".into());
    assert_eq!(meta.labels.as_ref(), Some(&pod_labels));
    assert_eq!(
        meta.annotations.as_ref().unwrap()["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(spec.strategy, storefront().spec.unwrap().strategy);

    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(
        pod.volumes,
        storefront().spec.unwrap().template.spec.unwrap().volumes
    );
    assert_eq!(
        env_pairs(&pod.containers[0])[2],
        ("RAILS_MAX_THREADS".into(), "4".into())
    );
    assert_eq!(pod.containers[1], container("sidecar", &[]));
    assert_eq!(c.labels()["team"], "web");
}

#[test]
fn candidate_renders_the_named_container() {
    let exp = experiment("e", &puma(1, 2), Some("sidecar"));
    let c = candidate_deployment(&storefront(), &exp, 1).unwrap();
    let pod = c.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0], puma_2x6());
    assert_eq!(
        env_pairs(&pod.containers[1])[0],
        ("WEB_CONCURRENCY".into(), "1".into())
    );
}

#[test]
fn unsupported_targets_are_refused_with_the_reason() {
    let exp = experiment("e", &puma(2, 4), None);
    let mut only_expressions: Deployment = storefront();
    let selector = &mut only_expressions.spec.as_mut().unwrap().selector;
    selector.match_labels = None;
    selector.match_expressions = Some(vec![serde_json::from_value(serde_json::json!(
        {"key": "app", "operator": "In", "values": ["storefront"]}
    ))
    .unwrap()]);
    let err = candidate_deployment(&only_expressions, &exp, 1).unwrap_err();
    assert_eq!(err.category(), "UnsupportedSelector");
    assert!(err.to_string().contains("matchExpressions"), "{err}");

    let mut no_uid = exp.clone();
    no_uid.metadata.uid = None;
    let err = candidate_deployment(&storefront(), &no_uid, 1).unwrap_err();
    assert!(err.to_string().contains("metadata.uid"), "{err}");
    let missing = experiment("e", &puma(2, 4), Some("web"));
    assert_eq!(
        candidate_deployment(&storefront(), &missing, 1)
            .unwrap_err()
            .category(),
        "ContainerNotFound"
    );
}

#[test]
fn a_promoted_target_runs_the_config_even_after_the_api_server_rewrites_quantities() {
    let config = ServerConfig {
        resources: Some(memory("1024Mi")),
        ..puma(2, 4)
    };
    let mut target = storefront();
    assert!(!runs_config(&target, &config, None));
    let template = promoted_template(&target, &config, None).unwrap();
    assert_eq!(
        template.metadata,
        storefront().spec.unwrap().template.metadata,
        "labels untouched"
    );
    target.spec.as_mut().unwrap().template = template;
    assert!(runs_config(&target, &config, None));
    target
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .resources = Some(memory("1Gi"));
    assert!(runs_config(&target, &config, None));
    assert!(!runs_config(&target, &puma(2, 5), None));
    assert!(!runs_config(&target, &config, Some("web")));
}

fn with_status(generation: i64, status: DeploymentStatus) -> Deployment {
    let mut d = storefront();
    d.metadata.generation = Some(generation);
    d.status = Some(status);
    d
}

fn settled(replicas: i32) -> DeploymentStatus {
    DeploymentStatus {
        observed_generation: Some(3),
        replicas: Some(replicas),
        updated_replicas: Some(replicas),
        available_replicas: Some(replicas),
        ready_replicas: Some(replicas),
        ..DeploymentStatus::default()
    }
}

#[test]
fn rollout_state_waits_like_kubectl_rollout_status() {
    let done = rollout_state(&with_status(3, settled(6)));
    assert_eq!(
        done,
        DeploymentState {
            replicas: 6,
            ready_replicas: 6,
            rolled_out: true
        }
    );
    assert!(
        !rollout_state(&with_status(4, settled(6))).rolled_out,
        "new generation not observed"
    );
    let old_pods_left = DeploymentStatus {
        replicas: Some(7),
        ..settled(6)
    };
    assert!(!rollout_state(&with_status(3, old_pods_left)).rolled_out);
    let unavailable = DeploymentStatus {
        available_replicas: Some(5),
        ready_replicas: Some(5),
        ..settled(6)
    };
    let s = rollout_state(&with_status(3, unavailable));
    assert_eq!((s.ready_replicas, s.rolled_out), (5, false));
    assert!(!rollout_state(&storefront()).rolled_out, "no status yet");
}

#[test]
fn variant_status_summarises_the_deployment() {
    let d = with_status(
        3,
        DeploymentStatus {
            ready_replicas: Some(4),
            ..settled(6)
        },
    );
    let s = variant_status(&d, RenderedServer::from(&puma(2, 6)));
    assert_eq!(
        (s.deployment.as_str(), s.replicas, s.ready_replicas),
        ("storefront", 6, 4)
    );
    assert_eq!(s.summary, "puma 2×6");
    assert_eq!(
        s.pods.as_deref(),
        Some("^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$")
    );
}
