//! The HPA's rule applied to the candidate's pods at 100 % (`replicas_needed`), and the reading
//! of what it needs: the HPA's resource metrics, the template's requests, PodMetrics.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde_json::json;

use crate::workload::{
    pod_usage, replicas_needed, resource_metrics, template_requests, PodUsage, ResourceMetric,
    ResourceTarget, Resources,
};

fn cpu_utilization(percent: f64) -> ResourceMetric {
    ResourceMetric {
        resource: "cpu".into(),
        container: None,
        target: ResourceTarget::Utilization(percent),
    }
}

fn requests(cpu: f64) -> BTreeMap<String, Resources> {
    BTreeMap::from([(
        "web".into(),
        Resources {
            cpu,
            memory: 256.0 * 1024.0 * 1024.0,
        },
    )])
}

fn pods(cpu: &[f64]) -> Vec<PodUsage> {
    cpu.iter()
        .map(|c| {
            BTreeMap::from([(
                "web".into(),
                Resources {
                    cpu: *c,
                    memory: 100.0 * 1024.0 * 1024.0,
                },
            )])
        })
        .collect()
}

#[test]
fn a_load_rise_asks_for_the_hpa_s_ceil_of_ratio_times_pods() {
    // 3 pods at 0.9 cores of 1 requested: 90 % against a 50 % target is 1.8 × 3 = 5.4 → 6.
    let need = replicas_needed(&[cpu_utilization(50.0)], &requests(1.0), &pods(&[0.9; 3])).unwrap();
    assert_eq!(need.replicas, 6);
    assert_eq!(need.because, "cpu at 90 % of requests (target 50 %)");
}

#[test]
fn within_the_tolerance_nothing_changes() {
    // 54 % against 50 %: a ratio of 1.08, inside the HPA's 10 %.
    let need =
        replicas_needed(&[cpu_utilization(50.0)], &requests(1.0), &pods(&[0.54; 4])).unwrap();
    assert_eq!(need.replicas, 4);
}

#[test]
fn less_load_asks_for_fewer_and_the_largest_metric_wins() {
    let memory = ResourceMetric {
        resource: "memory".into(),
        container: None,
        target: ResourceTarget::AverageValue(50.0 * 1024.0 * 1024.0),
    };
    // CPU asks for 1 (10 % of a 50 % target), memory for 6 (100 Mi per pod against 50 Mi).
    let need = replicas_needed(
        &[cpu_utilization(50.0), memory],
        &requests(1.0),
        &pods(&[0.1; 3]),
    )
    .unwrap();
    assert_eq!(need.replicas, 6);
    assert_eq!(need.because, "memory at 100Mi per pod (target 50Mi)");
}

#[test]
fn no_pods_or_no_request_gives_nothing() {
    assert_eq!(
        replicas_needed(&[cpu_utilization(50.0)], &requests(1.0), &[]),
        None
    );
    // A utilization target without a request is an error for the HPA too.
    assert_eq!(
        replicas_needed(&[cpu_utilization(50.0)], &requests(0.0), &pods(&[0.5])),
        None
    );
}

#[test]
fn a_container_resource_metric_counts_that_container_only() {
    let web = ResourceMetric {
        container: Some("web".into()),
        ..cpu_utilization(100.0)
    };
    let mut with_sidecar = pods(&[1.0, 1.0]);
    for p in &mut with_sidecar {
        p.insert(
            "proxy".into(),
            Resources {
                cpu: 5.0,
                memory: 0.0,
            },
        );
    }
    let need = replicas_needed(&[web], &requests(0.5), &with_sidecar).unwrap();
    assert_eq!(
        need.replicas, 4,
        "web at 200 % of its 0.5 cores over 2 pods"
    );
}

#[test]
fn reads_the_resource_metrics_and_skips_the_others() {
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "storefront"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "storefront"},
            "maxReplicas": 6,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 300}}},
                {"type": "ContainerResource", "containerResource": {"name": "memory",
                    "container": "web", "target": {"type": "AverageValue", "averageValue": "200Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "puma_backlog"},
                    "target": {"type": "AverageValue", "averageValue": "2"}}}
            ]
        }
    }))
    .unwrap();
    let (metrics, skipped) = resource_metrics(&hpa);
    assert_eq!(skipped, 1);
    assert_eq!(metrics[0], cpu_utilization(300.0));
    assert_eq!(metrics[1].container.as_deref(), Some("web"));
    assert_eq!(
        metrics[1].target,
        ResourceTarget::AverageValue(200.0 * 1024.0 * 1024.0)
    );
}

#[test]
fn reads_requests_and_pod_metrics() {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "storefront-candidate"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [
            {"name": "web", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}},
            {"name": "proxy"}
        ]}}}
    }))
    .unwrap();
    let r = template_requests(&d);
    assert_eq!(r["web"].cpu, 0.25);
    assert_eq!(r["web"].memory, 128.0 * 1024.0 * 1024.0);
    assert_eq!(r["proxy"], Resources::default());
    let usage = pod_usage(&json!({
        "metadata": {"name": "storefront-candidate-abc"},
        "containers": [{"name": "web", "usage": {"cpu": "123456789n", "memory": "51200Ki"}}]
    }))
    .unwrap();
    assert!((usage["web"].cpu - 0.123456789).abs() < 1e-12);
    assert_eq!(usage["web"].memory, 50.0 * 1024.0 * 1024.0);
    assert_eq!(pod_usage(&json!({"containers": []})), None);
}
