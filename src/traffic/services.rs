//! `gatewayAPI` router: the Services an HTTPRoute splits traffic between (a stage's baseline
//! and candidate; a selection's baseline, fresh baseline and candidates).
//!
//! Candidate pods carry the target's labels (so the `replicas` router works through the
//! user's Service, and NetworkPolicies, PodMonitors or PDBs on those labels cover them too),
//! which means a Service selecting only those labels would reach both variants. A Service
//! selector is equality-only — there is no "not the candidate" — so the baseline Service also
//! pins the target's current `pod-template-hash`. That pin is only sound while the target's
//! template stays the one the experiment started with: a change (a rollout would leave the
//! pinned hash without pods) rolls the experiment back (`TargetChanged`), and the rollback
//! puts the route back on the user's Service before anything else; the baseline Service is
//! never re-pinned to a new ReplicaSet.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::Value;

use super::gateway::route_services;
use crate::api::{ConcurrencyExperiment, Traffic};
use crate::workload::{
    baseline_service_name, candidate_service_name, experiment_owner_ref,
    fresh_baseline_service_name, target_match_labels, variant_label, variant_labels,
    variant_service_name, WorkloadError, POD_TEMPLATE_HASH, VARIANT_BASELINE, VARIANT_CANDIDATE,
    VARIANT_FRESH_BASELINE,
};

/// `<service>-baseline`: the target's current ReplicaSet's pods, on the user Service's ports.
pub fn baseline_service(
    user_service: &Service,
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    pod_template_hash: &str,
) -> Result<Service, WorkloadError> {
    let mut selector = target_match_labels(target)?;
    selector.insert(POD_TEMPLATE_HASH.to_string(), pod_template_hash.to_string());
    variant_service(
        user_service,
        experiment,
        baseline_service_name(&user_service.name_any()),
        VARIANT_BASELINE,
        selector,
    )
}

/// `<service>-candidate`: the candidate Deployment's pods, on the user Service's ports.
pub fn candidate_service(
    user_service: &Service,
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
) -> Result<Service, WorkloadError> {
    let name = candidate_service_name(&user_service.name_any());
    pods_service(user_service, target, experiment, name, VARIANT_CANDIDATE)
}

/// `<service>-candidate-<index + 1>`: a selection's candidate `index`'s pods.
pub fn selection_variant_service(
    user_service: &Service,
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    index: usize,
) -> Result<Service, WorkloadError> {
    let name = variant_service_name(&user_service.name_any(), index);
    pods_service(
        user_service,
        target,
        experiment,
        name,
        &variant_label(index),
    )
}

/// `<service>-fresh-baseline`: the fresh baseline's pods.
pub fn fresh_baseline_service(
    user_service: &Service,
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
) -> Result<Service, WorkloadError> {
    let name = fresh_baseline_service_name(&user_service.name_any());
    pods_service(
        user_service,
        target,
        experiment,
        name,
        VARIANT_FRESH_BASELINE,
    )
}

/// The pods of one variant Deployment of the experiment: the target's labels and its own.
fn pods_service(
    user_service: &Service,
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    name: String,
    variant: &str,
) -> Result<Service, WorkloadError> {
    let mut selector = target_match_labels(target)?;
    selector.extend(variant_labels(&experiment.name_any(), variant));
    variant_service(user_service, experiment, name, variant, selector)
}

/// Annotation the Deployment controller keeps equal on a Deployment and its current ReplicaSet.
pub(super) const REVISION: &str = "deployment.kubernetes.io/revision";

/// The `pod-template-hash` of the target's current ReplicaSet (owned by the target, same
/// revision), for [`baseline_service`]. `None` while the Deployment controller has not made it.
pub fn current_pod_template_hash(
    target: &Deployment,
    replica_sets: &[ReplicaSet],
) -> Option<String> {
    let revision = target.annotations().get(REVISION)?;
    let uid = target.uid()?;
    replica_sets
        .iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .find(|rs| rs.annotations().get(REVISION) == Some(revision))
        .and_then(|rs| rs.labels().get(POD_TEMPLATE_HASH).cloned())
}

/// The user's Service in front of the target: `spec.traffic.service` if set, else the one
/// Service whose selector matches the target's pods — among those the HTTPRoute sends traffic
/// to, when there is a route.
pub fn target_service<'a>(
    target: &Deployment,
    traffic: &Traffic,
    services: &'a [Service],
    route: Option<&Value>,
) -> Result<&'a Service, WorkloadError> {
    if let Some(name) = &traffic.service {
        return services
            .iter()
            .find(|s| s.name_any() == *name)
            .ok_or_else(|| WorkloadError::ServiceNotFound {
                service: name.clone(),
            });
    }
    let pod_labels = target
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let in_route = route.map(route_services);
    let matching: Vec<&Service> = services
        .iter()
        .filter(|s| {
            let selector = s.spec.as_ref().and_then(|s| s.selector.as_ref());
            selector.is_some_and(|sel| {
                !sel.is_empty() && sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v))
            })
        })
        .filter(|s| {
            in_route
                .as_ref()
                .is_none_or(|names| names.contains(&s.name_any()))
        })
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(WorkloadError::NoTargetService {
            deployment: target.name_any(),
            via_route: route.is_some(),
        }),
        many => Err(WorkloadError::AmbiguousTargetService {
            deployment: target.name_any(),
            services: many.iter().map(|s| s.name_any()).collect(),
        }),
    }
}

fn variant_service(
    user_service: &Service,
    experiment: &ConcurrencyExperiment,
    name: String,
    variant: &str,
    selector: BTreeMap<String, String>,
) -> Result<Service, WorkloadError> {
    let ports: Vec<ServicePort> = user_service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
        .into_iter()
        // A ClusterIP Service has no node ports, and copying one would collide with the user's.
        .map(|p| ServicePort {
            node_port: None,
            ..p
        })
        .collect();
    if ports.is_empty() {
        return Err(WorkloadError::ServiceWithoutPorts {
            service: user_service.name_any(),
        });
    }
    Ok(Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: user_service.namespace().or_else(|| experiment.namespace()),
            labels: Some(variant_labels(&experiment.name_any(), variant)),
            owner_references: Some(vec![experiment_owner_ref(experiment)?]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(selector),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}
