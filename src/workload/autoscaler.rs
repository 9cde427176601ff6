//! The target's HorizontalPodAutoscaler: found by its `scaleTargetRef`, only ever read.
//!
//! While the experiment runs it sizes the target for the whole load (the candidate's pods carry
//! the target's labels, so it counts them); the split works around it
//! (`traffic::Sizing::Autoscaled`). No copy for the candidate: the HPA controller refuses two
//! HPAs selecting the same pods (`AmbiguousSelector`), and the target's selects the candidate's.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;

/// Kubernetes' own default for `spec.minReplicas`.
pub const DEFAULT_MIN_REPLICAS: i32 = 1;

/// Whether `hpa` scales the Deployment `deployment`.
pub fn scales(hpa: &HorizontalPodAutoscaler, deployment: &str) -> bool {
    hpa.spec.as_ref().is_some_and(|s| {
        let r = &s.scale_target_ref;
        r.kind == "Deployment"
            && r.name == deployment
            && r.api_version
                .as_deref()
                .is_none_or(|v| v.starts_with("apps/"))
    })
}

/// The HPA scaling `target` among `hpas` (one namespace's): the first by name when several do
/// (Kubernetes itself then reports `AmbiguousSelector` on them).
pub fn target_autoscaler<'a>(
    hpas: impl IntoIterator<Item = &'a HorizontalPodAutoscaler>,
    target: &str,
) -> Option<&'a HorizontalPodAutoscaler> {
    hpas.into_iter()
        .filter(|h| scales(h, target))
        .min_by_key(|h| h.name_any())
}

/// `(minReplicas, maxReplicas)`.
pub fn bounds(hpa: &HorizontalPodAutoscaler) -> (i32, i32) {
    let spec = hpa.spec.as_ref();
    let min = spec
        .and_then(|s| s.min_replicas)
        .unwrap_or(DEFAULT_MIN_REPLICAS);
    let max = spec.map_or(min, |s| s.max_replicas);
    (min, max.max(min))
}

/// The HPA controller's tolerance: a usage ratio within 10 % of 1 changes nothing.
pub const TOLERANCE: f64 = 0.1;

/// A metric of the HPA the operator can evaluate itself from the resource metrics API: a
/// `Resource` or `ContainerResource` target on CPU or memory. (`Pods`, `Object` and `External`
/// metrics come through adapters only the HPA controller is configured for.)
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceMetric {
    /// `cpu` or `memory`.
    pub resource: String,
    /// `ContainerResource`: that container only; `Resource`: the whole pod.
    pub container: Option<String>,
    pub target: ResourceTarget,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResourceTarget {
    /// `averageUtilization`: percent of the pods' requests.
    Utilization(f64),
    /// `averageValue` per pod: cores or bytes.
    AverageValue(f64),
}

/// The CPU (cores) and memory (bytes) of one container: a pod's usage, or its requests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Resources {
    pub cpu: f64,
    pub memory: f64,
}

impl Resources {
    fn of(&self, resource: &str) -> f64 {
        if resource == "cpu" {
            self.cpu
        } else {
            self.memory
        }
    }
}

/// One pod's usage by container name (a metrics.k8s.io `PodMetrics`).
pub type PodUsage = BTreeMap<String, Resources>;

/// What the HPA's rule asks of the pods it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    pub replicas: i32,
    /// The metric that asks the most, with its value and target, e.g. `cpu at 92 % of
    /// requests (target 50 %)`.
    pub because: String,
}

/// The resource metrics of `hpa` this module can evaluate, and how many it cannot.
pub fn resource_metrics(hpa: &HorizontalPodAutoscaler) -> (Vec<ResourceMetric>, usize) {
    let specs = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.clone())
        .unwrap_or_default();
    let total = specs.len();
    let found: Vec<ResourceMetric> = specs
        .iter()
        .filter_map(|m| {
            let (name, container, target) = match (&m.resource, &m.container_resource) {
                (Some(r), _) if m.type_ == "Resource" => (&r.name, None, &r.target),
                (_, Some(c)) if m.type_ == "ContainerResource" => {
                    (&c.name, Some(c.container.clone()), &c.target)
                }
                _ => return None,
            };
            if name != "cpu" && name != "memory" {
                return None;
            }
            let target = match (target.type_.as_str(), target.average_utilization) {
                ("Utilization", Some(u)) if u > 0 => ResourceTarget::Utilization(f64::from(u)),
                ("AverageValue", _) => ResourceTarget::AverageValue(
                    target
                        .average_value
                        .as_ref()
                        .and_then(|q| crate::api::parse_quantity(&q.0))
                        .filter(|v| *v > 0.0)?,
                ),
                _ => return None,
            };
            Some(ResourceMetric {
                resource: name.clone(),
                container,
                target,
            })
        })
        .collect();
    let skipped = total - found.len();
    (found, skipped)
}

/// The replicas the HPA controller's rule gives `pods` — each metric's usage ratio (average
/// utilization over its target, or average value over its target), `⌈ratio × pods⌉` unless
/// within [`TOLERANCE`], the largest over the metrics — with `requests` the pod template's
/// per container (a utilization target needs them, as in the HPA). None without pods or
/// without a metric it can evaluate.
pub fn replicas_needed(
    metrics: &[ResourceMetric],
    requests: &BTreeMap<String, Resources>,
    pods: &[PodUsage],
) -> Option<Need> {
    let n = pods.len();
    if n == 0 {
        return None;
    }
    let sum = |per_container: &BTreeMap<String, Resources>, m: &ResourceMetric| -> f64 {
        per_container
            .iter()
            .filter(|(name, _)| m.container.as_ref().is_none_or(|c| c == *name))
            .map(|(_, r)| r.of(&m.resource))
            .sum()
    };
    metrics
        .iter()
        .filter_map(|m| {
            let average = pods.iter().map(|p| sum(p, m)).sum::<f64>() / n as f64;
            let (ratio, because) = match m.target {
                ResourceTarget::Utilization(target) => {
                    let request = sum(requests, m);
                    if request <= 0.0 {
                        return None;
                    }
                    let utilization = 100.0 * average / request;
                    let because = format!(
                        "{} at {utilization:.0} % of requests (target {target:.0} %)",
                        m.resource
                    );
                    (utilization / target, because)
                }
                ResourceTarget::AverageValue(target) => {
                    let because = format!(
                        "{} at {} per pod (target {})",
                        m.resource,
                        amount(&m.resource, average),
                        amount(&m.resource, target)
                    );
                    (average / target, because)
                }
            };
            let replicas = if (ratio - 1.0).abs() <= TOLERANCE {
                n as i32
            } else {
                (ratio * n as f64).ceil() as i32
            };
            Some(Need { replicas, because })
        })
        .max_by_key(|need| need.replicas)
}

fn amount(resource: &str, v: f64) -> String {
    if resource == "cpu" {
        format!("{:.0}m", v * 1000.0)
    } else {
        format!("{:.0}Mi", v / 1024f64.powi(2))
    }
}

/// The requests of a Deployment's pod template, per container (a missing request is 0).
pub fn template_requests(d: &Deployment) -> BTreeMap<String, Resources> {
    let containers = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.as_slice())
        .unwrap_or_default();
    containers
        .iter()
        .map(|c| {
            let get = |name: &str| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get(name))
                    .and_then(|q| crate::api::parse_quantity(&q.0))
                    .unwrap_or(0.0)
            };
            let requests = Resources {
                cpu: get("cpu"),
                memory: get("memory"),
            };
            (c.name.clone(), requests)
        })
        .collect()
}

/// One metrics.k8s.io/v1beta1 `PodMetrics` (`containers[].usage.{cpu,memory}`) as usage per
/// container; None when it has no container usage.
pub fn pod_usage(pod_metrics: &serde_json::Value) -> Option<PodUsage> {
    let containers = pod_metrics.get("containers")?.as_array()?;
    let usage: PodUsage = containers
        .iter()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?.to_string();
            let get = |r: &str| {
                c.pointer(&format!("/usage/{r}"))
                    .and_then(|q| q.as_str())
                    .and_then(crate::api::parse_quantity)
                    .unwrap_or(0.0)
            };
            Some((
                name,
                Resources {
                    cpu: get("cpu"),
                    memory: get("memory"),
                },
            ))
        })
        .collect();
    (!usage.is_empty()).then_some(usage)
}
