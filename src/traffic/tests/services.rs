use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Service, ServicePort};
use kube::ResourceExt;
use serde_json::Value;

use crate::api::Traffic;
use crate::traffic::services::*;
use crate::workload::tests::fixtures::{experiment, puma, service, storefront, NAMESPACE};
use crate::workload::POD_TEMPLATE_HASH;
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
    let elsewhere = serde_json::json!({"spec": {"rules": [{"backendRefs": [{"name": "assets"}]}]}});
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
