//! Fetch what the stage machine needs to see: the only I/O of observing. The target, the
//! candidate and a selection's variants come from the watch cache; the route, the Services
//! and the target's ReplicaSets (gatewayAPI) and the ConfigMaps it reads from the API.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::context::Caches;
use super::super::error::{is_not_found, Error, Result};
use super::owner::owned_by;
use super::variants::{self, VariantObjects};
use crate::api::ConcurrencyExperiment;
use crate::plan;
use crate::traffic;
use crate::workload;

/// The Gateway API HTTPRoute, read as a dynamic object (no typed crate needed).
pub fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// The raw objects of one reconcile; `act` needs them to render and patch.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    pub target: Option<Deployment>,
    pub candidate: Option<Deployment>,
    /// The HorizontalPodAutoscaler that scales the target, if any (from the cache).
    pub autoscaler: Option<HorizontalPodAutoscaler>,
    /// gatewayAPI only: the HTTPRoute as JSON (k8s-openapi has no Gateway API types).
    pub route: Option<Value>,
    /// gatewayAPI only: the Service the route sends the target's traffic to.
    pub service: Option<Service>,
    /// gatewayAPI only: every Service in the namespace (to find the variant Services, ours or
    /// someone else's by the same name).
    pub services: Vec<Service>,
    /// gatewayAPI only: `pod-template-hash` of the target's current ReplicaSet, which the
    /// baseline Service pins so it never selects candidate pods.
    pub baseline_hash: Option<String>,
    /// gatewayAPI only: why the user's Service could not be determined.
    pub service_error: Option<String>,
    /// Older live experiments on the same target (from the controller's cache).
    pub rivals: Vec<String>,
    /// Live experiments on the same target of any age (a retry waits for them).
    pub others: Vec<String>,
    /// Why the candidate's pods are not ready, when it has fewer ready than wanted.
    pub candidate_problem: Option<String>,
    /// Data of the ConfigMaps the target's app container takes server variables from
    /// (`envFrom`, `configMapKeyRef`), by name; a name missing here was not found or could not
    /// be read (logged, never a reconcile error). Secrets are never read.
    pub configmaps: BTreeMap<String, BTreeMap<String, String>>,
    /// A selection's candidates and the fresh baseline, by name (from the cache).
    pub variants: VariantObjects,
    /// The candidate's pods' usage (metrics.k8s.io), read only at 100 % with the `replicas`
    /// router when an HPA scales the target (`plan::Autoscaler::candidate_need`).
    pub candidate_usage: Option<Vec<workload::PodUsage>>,
}

fn optional<T>(r: std::result::Result<T, kube::Error>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the target and the candidate from the watch cache, and (gatewayAPI) the route and
/// its Service from the API.
pub async fn fetch(
    client: &kube::Client,
    caches: &Caches,
    exp: &ConcurrencyExperiment,
) -> Result<Fetched> {
    let ns = exp.namespace().ok_or(Error::MissingNamespace)?;
    let target_name = &exp.spec.target_ref.name;
    let on_target = caches.targeting(&ns, target_name);
    let target = caches.deployment(client, &ns, target_name).await?;
    let candidate = caches
        .deployment(client, &ns, &workload::candidate_name(target_name))
        .await?;
    let autoscaler = caches.autoscaler_of(&ns, target_name);
    // The pods are listed only when the deadline has passed and their reason goes into the
    // decision: waiting experiments cost no list.
    let status = exp.status.clone().unwrap_or_default();
    let candidate_problem = match &candidate {
        Some(c) if plan::deadline_passed(&exp.spec, &status, jiff::Timestamp::now()) => {
            super::pods::not_ready_reason(client, c).await
        }
        _ => None,
    };
    let candidate_usage = match (&candidate, &autoscaler) {
        (Some(c), Some(_)) if plan::carries_the_whole_load(&exp.spec, &status) => {
            super::pods::usage(client, c).await
        }
        _ => None,
    };
    let (mut route, mut service, mut baseline_hash, mut service_error) = (None, None, None, None);
    let mut all_services = Vec::new();
    if exp.spec.traffic.router.uses_route() {
        if let Some(name) = &exp.spec.traffic.http_route {
            let routes: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &http_route_resource());
            if let Some(r) = optional(routes.get(name).await)? {
                route = Some(serde_json::to_value(r).map_err(|source| Error::Serialize {
                    what: "HTTPRoute",
                    source,
                })?);
            }
        }
        if let Some(t) = &target {
            let services: Api<Service> = Api::namespaced(client.clone(), &ns);
            let services = services.list(&ListParams::default()).await?.items;
            // Once split, the route names the operator's variant Services, not the user's:
            // then the user's Service is found by its selector alone.
            let route_for_match = route.as_ref().filter(|r| !split_by(exp, r, &services));
            match traffic::target_service(t, &exp.spec.traffic, &services, route_for_match) {
                Ok(s) => service = Some(s.clone()),
                Err(e) => service_error = Some(e.to_string()),
            }
            baseline_hash = baseline_pod_template_hash(client, t).await?;
            all_services = services;
        }
    }
    let configmaps = match &target {
        Some(t) => fetch_config_maps(client, &ns, t, exp.spec.container.as_deref()).await,
        None => BTreeMap::new(),
    };
    Ok(Fetched {
        target,
        candidate,
        autoscaler,
        route,
        service,
        services: all_services,
        baseline_hash,
        service_error,
        rivals: rivals(&on_target, exp),
        others: live_on_target(&on_target, exp),
        candidate_problem,
        configmaps,
        variants: variants::fetch(client, caches, &ns, target_name).await?,
        candidate_usage,
    })
}

/// The ConfigMaps the baseline's server variables may come from (a few GETs, only for
/// targets that use them). Only the read-back needs them, so a failure (say, RBAC without
/// `configmaps get`) is logged and the values show as unknown — it must never hold up a
/// rollback.
async fn fetch_config_maps(
    client: &kube::Client,
    ns: &str,
    target: &Deployment,
    container: Option<&str>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let Ok(app) = workload::app_container(target, container) else {
        return BTreeMap::new();
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut out = BTreeMap::new();
    for name in workload::referenced_config_maps(app, &workload::SERVER_VARS) {
        match api.get(&name).await {
            Ok(cm) => {
                out.insert(name, cm.data.unwrap_or_default());
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => tracing::warn!(configmap = %name, namespace = ns, error = %e,
                "cannot read a ConfigMap the target takes server variables from"),
        }
    }
    out
}

/// Names of the other live experiments in the same namespace that target the same Deployment
/// and came first (older, or as old with a smaller name): this one must not run beside them.
/// `all` may hold any experiments; the caller passes those the index has on this target.
pub fn rivals(all: &[Arc<ConcurrencyExperiment>], exp: &ConcurrencyExperiment) -> Vec<String> {
    let key = |e: &ConcurrencyExperiment| (e.meta().creation_timestamp.clone(), e.name_any());
    let mine = key(exp);
    sorted_names(live_others(all, exp).filter(|o| key(o) < mine))
}

/// Names of every other live experiment in the namespace on the same target, of any age.
pub fn live_on_target(
    all: &[Arc<ConcurrencyExperiment>],
    exp: &ConcurrencyExperiment,
) -> Vec<String> {
    sorted_names(live_others(all, exp))
}

fn live_others<'a>(
    all: &'a [Arc<ConcurrencyExperiment>],
    exp: &'a ConcurrencyExperiment,
) -> impl Iterator<Item = &'a Arc<ConcurrencyExperiment>> {
    all.iter()
        .filter(|o| o.namespace() == exp.namespace() && o.name_any() != exp.name_any())
        .filter(|o| o.spec.target_ref.name == exp.spec.target_ref.name)
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .filter(|o| !o.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
}

fn sorted_names<'a>(
    experiments: impl Iterator<Item = &'a Arc<ConcurrencyExperiment>>,
) -> Vec<String> {
    let mut names: Vec<String> = experiments.map(|o| o.name_any()).collect();
    names.sort();
    names
}

/// The `pod-template-hash` of the target's current ReplicaSet.
pub async fn baseline_pod_template_hash(
    client: &kube::Client,
    target: &Deployment,
) -> Result<Option<String>> {
    let ns = target.namespace().ok_or(Error::MissingNamespace)?;
    let Ok(labels) = workload::target_match_labels(target) else {
        return Ok(None);
    };
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let list = replica_sets
        .list(&ListParams::default().labels(&selector))
        .await?;
    Ok(traffic::current_pod_template_hash(target, &list.items))
}

/// True when the route already sends traffic to a Service this experiment made.
fn split_by(exp: &ConcurrencyExperiment, route: &Value, services: &[Service]) -> bool {
    let in_route = traffic::route_services(route);
    services
        .iter()
        .any(|s| owned_by(s, exp) && in_route.contains(&s.name_any()))
}
