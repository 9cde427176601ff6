//! `gatewayAPI` router: the two Services an HTTPRoute splits traffic between.
//!
//! Candidate pods carry the target's labels (so the `replicas` router works through the
//! user's Service), which means a Service selecting only those labels would reach both
//! variants. The baseline Service therefore also pins the target's current `pod-template-hash`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::api::ConcurrencyExperiment;
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
    use crate::workload::fixtures::{experiment, puma, service, storefront, NAMESPACE};
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
