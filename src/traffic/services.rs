//! `gatewayAPI` router: the two Services an HTTPRoute splits traffic between.
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

use super::route_services;
use crate::api::{ConcurrencyExperiment, Traffic};
use crate::workload::{
    baseline_service_name, candidate_service_name, experiment_owner_ref, target_match_labels,
    variant_labels, WorkloadError, POD_TEMPLATE_HASH, VARIANT_BASELINE, VARIANT_CANDIDATE,
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
    let mut selector = target_match_labels(target)?;
    selector.extend(variant_labels(&experiment.name_any(), VARIANT_CANDIDATE));
    variant_service(
        user_service,
        experiment,
        candidate_service_name(&user_service.name_any()),
        VARIANT_CANDIDATE,
        selector,
    )
}

/// Annotation the Deployment controller keeps equal on a Deployment and its current ReplicaSet.
const REVISION: &str = "deployment.kubernetes.io/revision";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::tests::fixtures::{experiment, puma, service, storefront, NAMESPACE};
    use pretty_assertions::assert_eq;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn baseline_pins_the_current_replica_set_and_candidate_the_variant() {
        let exp = experiment("sf-threads", &puma(2, 4), None);
        let user = service("storefront");
        let b = baseline_service(&user, &storefront(), &exp, "7d9f8b6c5d").unwrap();
        let c = candidate_service(&user, &storefront(), &exp).unwrap();

        assert_eq!(b.metadata.name.as_deref(), Some("storefront-baseline"));
        assert_eq!(c.metadata.name.as_deref(), Some("storefront-candidate"));
        assert_eq!(
            b.spec.as_ref().unwrap().selector,
            Some(labels(&[
                ("app", "storefront"),
                ("pod-template-hash", "7d9f8b6c5d")
            ]))
        );
        assert_eq!(
            c.spec.as_ref().unwrap().selector,
            Some(labels(&[
                ("app", "storefront"),
                ("concurrency.dev/experiment", "sf-threads"),
                ("concurrency.dev/variant", "candidate"),
            ]))
        );
        for (svc, variant) in [(&b, "baseline"), (&c, "candidate")] {
            assert_eq!(svc.metadata.namespace.as_deref(), Some(NAMESPACE));
            assert_eq!(svc.labels()["concurrency.dev/variant"], variant);
            let owner = &svc.owner_references()[0];
            assert_eq!(
                (owner.name.as_str(), owner.controller),
                ("sf-threads", Some(true))
            );
            let spec = svc.spec.as_ref().unwrap();
            assert_eq!(spec.type_, None, "ClusterIP by default");
            let port = &spec.ports.as_ref().unwrap()[0];
            let user_port = &user.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
            assert_eq!(
                *port,
                ServicePort {
                    node_port: None,
                    ..user_port.clone()
                }
            );
        }
    }

    fn named(name: &str, selector: &[(&str, &str)]) -> Service {
        let mut s = service(name);
        s.spec.as_mut().unwrap().selector = Some(labels(selector));
        s
    }

    #[test]
    fn the_target_service_is_found_by_selector_route_or_name() {
        let target = storefront();
        let web = named("storefront", &[("app", "storefront")]);
        let tier = named("frontend", &[("tier", "frontend")]);
        let other = named("assets", &[("app", "assets")]);
        let by_name = |svc: Option<&str>, services: &[Service], route: Option<&Value>| {
            let traffic = Traffic {
                service: svc.map(String::from),
                ..Traffic::default()
            };
            target_service(&target, &traffic, services, route).map(|s| s.name_any())
        };
        let services = [web.clone(), other.clone()];
        assert_eq!(by_name(None, &services, None), Ok("storefront".into()));
        assert_eq!(
            by_name(Some("assets"), &services, None),
            Ok("assets".into())
        );
        assert_eq!(
            by_name(Some("gone"), &services, None)
                .unwrap_err()
                .to_string(),
            "spec.traffic.service: Service gone not found"
        );

        let both = [web, tier, other];
        let err = by_name(None, &both, None).unwrap_err();
        assert_eq!(err.category(), "AmbiguousService");
        assert!(
            err.to_string()
                .contains("Services storefront, frontend all select"),
            "{err}"
        );
        let route = serde_json::json!({"metadata": {"namespace": NAMESPACE},
            "spec": {"rules": [{"backendRefs": [{"name": "frontend", "port": 80}]}]}});
        assert_eq!(by_name(None, &both, Some(&route)), Ok("frontend".into()));
        let elsewhere =
            serde_json::json!({"spec": {"rules": [{"backendRefs": [{"name": "assets"}]}]}});
        assert_eq!(
            by_name(None, &both, Some(&elsewhere))
                .unwrap_err()
                .to_string(),
            "spec.traffic.service: no Service referenced by the HTTPRoute selects the pods of \
             Deployment storefront; set spec.traffic.service"
        );
    }

    #[test]
    fn the_current_replica_set_gives_the_hash() {
        let mut target = storefront();
        target.metadata.uid = Some("target-uid".into());
        target.annotations_mut().insert(REVISION.into(), "4".into());
        let rs = |owner: &str, revision: &str, hash: &str| -> ReplicaSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("storefront-{hash}"),
                    "annotations": {REVISION: revision},
                    "labels": {"app": "storefront", POD_TEMPLATE_HASH: hash},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": "storefront", "uid": owner, "controller": true}]
                }
            }))
            .unwrap()
        };
        let sets = [
            rs("target-uid", "3", "old"),
            rs("someone-else", "4", "foreign"),
            rs("target-uid", "4", "current"),
        ];
        assert_eq!(
            current_pod_template_hash(&target, &sets),
            Some("current".into())
        );
        assert_eq!(current_pod_template_hash(&target, &sets[..2]), None);
    }

    #[test]
    fn a_service_without_ports_is_refused() {
        let mut user = service("storefront");
        user.spec.as_mut().unwrap().ports = None;
        let exp = experiment("e", &puma(2, 4), None);
        let err = candidate_service(&user, &storefront(), &exp).unwrap_err();
        assert_eq!(err.category(), "ServiceWithoutPorts");
        assert_eq!(
            err.to_string(),
            "spec.traffic.service: Service storefront has no spec.ports to copy"
        );
    }
}
