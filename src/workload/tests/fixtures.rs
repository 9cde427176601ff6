//! Small builders for tests of rendering and routing.

use k8s_openapi::api::apps::v1::Deployment;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, ResourceRequirements, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use crate::api::{ConcurrencyExperiment, FalconMode, FalconOptions, ServerConfig, ServerKind};

pub const NAMESPACE: &str = "shop";

pub fn env(pairs: &[(&str, &str)]) -> Vec<EnvVar> {
    pairs
        .iter()
        .map(|(name, value)| EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        })
        .collect()
}

/// `(name, value)` pairs of a container's env, in order.
pub fn env_pairs(c: &Container) -> Vec<(String, String)> {
    c.env
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
        .collect()
}

pub fn container(name: &str, vars: &[(&str, &str)]) -> Container {
    Container {
        name: name.to_string(),
        image: Some("ruby-app:1".to_string()),
        env: (!vars.is_empty()).then(|| env(vars)),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".to_string()),
            ..ContainerPort::default()
        }]),
        ..Container::default()
    }
}

/// The Puma 2×6 container the seeds start from, plus an unrelated variable.
pub fn puma_2x6() -> Container {
    container(
        "app",
        &[
            ("RAILS_ENV", "production"),
            ("WEB_CONCURRENCY", "2"),
            ("RAILS_MAX_THREADS", "6"),
            ("PUMA_MAX_THREADS", "6"),
            ("PUMA_MIN_THREADS", "6"),
        ],
    )
}

/// A Deployment `name` in [`NAMESPACE`] selecting `app: name`, with a prometheus annotation,
/// a readiness probe and a volume on the template so tests can see they are kept.
pub fn deployment(name: &str, containers: Vec<Container>) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name, "team": "web"},
                     "generation": 3},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "frontend"},
                             "annotations": {"prometheus.io/scrape": "true"}},
                "spec": {"containers": containers, "volumes": [{"name": "tmp", "emptyDir": {}}]}
            }
        }
    }))
    .unwrap()
}

pub fn storefront() -> Deployment {
    let sidecar = container("sidecar", &[]);
    deployment("storefront", vec![puma_2x6(), sidecar])
}

pub fn puma(workers: i32, threads: i32) -> ServerConfig {
    ServerConfig {
        server: ServerKind::Puma,
        workers: Some(workers),
        threads: Some(threads),
        ..ServerConfig::default()
    }
}

pub fn falcon(workers: i32, mode: Option<FalconMode>) -> ServerConfig {
    ServerConfig {
        server: ServerKind::Falcon,
        workers: Some(workers),
        falcon: mode.map(|mode| FalconOptions {
            mode,
            bind: None,
            config: None,
        }),
        ..ServerConfig::default()
    }
}

pub fn experiment(
    name: &str,
    candidate: &ServerConfig,
    container: Option<&str>,
) -> ConcurrencyExperiment {
    serde_json::from_value(json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": "0b5e-uid"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "container": container,
            "candidate": candidate,
            "analysis": {"prometheus": {"url": "http://prometheus:9090"},
                         "checks": [{"metric": "latency"}]}
        }
    }))
    .unwrap()
}

/// A Service `name` selecting `app: storefront` on port 80 → `http`, with a nodePort that
/// must not be copied.
pub fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "type": "NodePort",
            "selector": {"app": "storefront"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP",
                       "nodePort": 30080}]
        }
    }))
    .unwrap()
}

/// Owned `(name, value)` pairs, to compare with [`env_pairs`].
pub fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Resources with only a memory limit.
pub fn memory(limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity(limit.to_string()),
        )])),
        ..ResourceRequirements::default()
    }
}
