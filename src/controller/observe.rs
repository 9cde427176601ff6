//! Fetch what the stage machine needs to see, and turn it into `plan::Observations`.
//!
//! `fetch` is the only I/O here; `observations` and its helpers are pure so that the rules for
//! abort/approve, spec errors and the effective weight are plain unit tests.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::error::{is_not_found, Error, Result};
use crate::api::{ConcurrencyExperiment, Router, ANNOTATION_ABORT, ANNOTATION_APPROVE};
use crate::plan::{Observations, TargetState};
use crate::traffic::{self, percent};
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
    /// gatewayAPI only: the HTTPRoute as JSON (k8s-openapi has no Gateway API types).
    pub route: Option<Value>,
    /// gatewayAPI only: the Service the route sends the target's traffic to.
    pub service: Option<Service>,
    /// gatewayAPI only: `pod-template-hash` of the target's current ReplicaSet, which the
    /// baseline Service pins so it never selects candidate pods.
    pub baseline_hash: Option<String>,
    /// gatewayAPI only: why the user's Service could not be determined.
    pub service_error: Option<String>,
    /// Other experiments in the namespace (from the controller's cache).
    pub rivals: Vec<String>,
    /// Data of the ConfigMaps the target's app container takes server variables from
    /// (`envFrom`, `configMapKeyRef`), by name; a name missing here was not found or could not
    /// be read (logged, never a reconcile error). Secrets are never read.
    pub configmaps: BTreeMap<String, BTreeMap<String, String>>,
}

fn optional<T>(r: std::result::Result<T, kube::Error>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the target, the candidate and (gatewayAPI) the route and its Service.
pub async fn fetch(
    client: &kube::Client,
    experiments: &[Arc<ConcurrencyExperiment>],
    exp: &ConcurrencyExperiment,
) -> Result<Fetched> {
    let ns = exp.namespace().ok_or(Error::MissingNamespace)?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let target_name = &exp.spec.target_ref.name;
    let target = optional(deployments.get(target_name).await)?;
    let candidate = optional(
        deployments
            .get(&workload::candidate_name(target_name))
            .await,
    )?;
    let (mut route, mut service, mut baseline_hash, mut service_error) = (None, None, None, None);
    if exp.spec.traffic.router == Router::GatewayApi {
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
        }
    }
    let configmaps = match &target {
        Some(t) => fetch_config_maps(client, &ns, t, exp.spec.container.as_deref()).await,
        None => BTreeMap::new(),
    };
    Ok(Fetched {
        target,
        candidate,
        route,
        service,
        baseline_hash,
        service_error,
        rivals: rivals(experiments, exp),
        configmaps,
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
pub fn rivals(all: &[Arc<ConcurrencyExperiment>], exp: &ConcurrencyExperiment) -> Vec<String> {
    let key = |e: &ConcurrencyExperiment| (e.meta().creation_timestamp.clone(), e.name_any());
    let mine = key(exp);
    let mut names: Vec<String> = all
        .iter()
        .filter(|o| o.namespace() == exp.namespace() && o.name_any() != exp.name_any())
        .filter(|o| o.spec.target_ref.name == exp.spec.target_ref.name)
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .filter(|o| !o.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        .filter(|o| key(o) < mine)
        .map(|o| o.name_any())
        .collect();
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
    let ours = workload::label_value(&exp.name_any());
    let in_route = traffic::route_services(route);
    services.iter().any(|s| {
        s.labels().get(workload::LABEL_EXPERIMENT) == Some(&ours)
            && in_route.contains(&s.name_any())
    })
}

fn flag(exp: &ConcurrencyExperiment, annotation: &str) -> bool {
    exp.annotations()
        .get(annotation)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Problems the CRD schema cannot see; each makes the experiment `Invalid`.
pub fn spec_error(exp: &ConcurrencyExperiment, fetched: &Fetched) -> Option<String> {
    if let Some(first) = fetched.rivals.first() {
        return Some(format!(
            "spec.targetRef: experiment {first} already targets Deployment {}; finish or delete it first",
            exp.spec.target_ref.name
        ));
    }
    // Before any traffic moves: a query that cannot run would only ever be Inconclusive.
    if let Err(e) = crate::analysis::validate(&exp.spec.analysis) {
        return Some(e.to_string());
    }
    let target = fetched.target.as_ref()?;
    let container = exp.spec.container.as_deref();
    if let Err(e) = workload::app_container_index(target, container)
        .and_then(|_| workload::target_match_labels(target))
        // Server flags that cannot be rewritten would leave the candidate on the baseline's
        // config.
        .and_then(|_| workload::promoted_template(target, &exp.spec.candidate, container))
    {
        return Some(e.to_string());
    }
    if exp.spec.traffic.router == Router::GatewayApi {
        if fetched.route.is_none() {
            let name = exp.spec.traffic.http_route.as_deref().unwrap_or_default();
            return Some(format!(
                "spec.traffic.httpRoute: HTTPRoute {name} not found"
            ));
        }
        if let Some(e) = &fetched.service_error {
            return Some(e.clone());
        }
    }
    None
}

/// The traffic share the candidate really gets now.
pub fn effective_weight(exp: &ConcurrencyExperiment, fetched: &Fetched) -> i32 {
    match exp.spec.traffic.router {
        Router::Replicas => {
            let ready = |d: &Option<Deployment>| {
                d.as_ref()
                    .map(|d| workload::rollout_state(d).ready_replicas)
                    .unwrap_or(0)
            };
            let candidate = ready(&fetched.candidate);
            percent(candidate, ready(&fetched.target) + candidate)
        }
        Router::GatewayApi => match (&fetched.route, &fetched.service) {
            (Some(route), Some(service)) => traffic::route_weight(
                route,
                &workload::baseline_service_name(&service.name_any()),
                &workload::candidate_service_name(&service.name_any()),
            )
            .unwrap_or(0),
            _ => 0,
        },
    }
}

/// Everything but the analysis, which the reconciler adds when it is due.
pub fn observations(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    now: jiff::Timestamp,
) -> Observations {
    let container = exp.spec.container.as_deref();
    let target = fetched.target.as_ref().and_then(|d| {
        Some(TargetState {
            deployment: workload::rollout_state(d),
            baseline: workload::read_baseline(d, container, &fetched.configmaps).ok()?,
            runs_candidate_config: workload::runs_config(d, &exp.spec.candidate, container),
        })
    });
    Observations {
        now,
        generation: exp.meta().generation.unwrap_or_default(),
        deleting: exp.meta().deletion_timestamp.is_some(),
        abort_requested: exp.spec.abort || flag(exp, ANNOTATION_ABORT),
        promotion_approved: exp.spec.approved,
        resume_requested: flag(exp, ANNOTATION_APPROVE),
        spec_error: spec_error(exp, fetched),
        target,
        candidate: fetched.candidate.as_ref().map(workload::rollout_state),
        effective_weight: effective_weight(exp, fetched),
        analysis: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::fixtures::{experiment, target};
    use serde_json::json;

    fn fetched(target: Option<Deployment>) -> Fetched {
        Fetched {
            target,
            ..Fetched::default()
        }
    }

    #[test]
    fn abort_comes_from_spec_or_annotation_and_approval_stays_apart() {
        let mut exp = experiment();
        let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
        assert!(!obs.abort_requested && !obs.promotion_approved && !obs.resume_requested);
        exp.metadata.annotations = Some(
            [
                (ANNOTATION_ABORT.to_string(), "True".to_string()),
                (ANNOTATION_APPROVE.to_string(), "yes".to_string()),
            ]
            .into(),
        );
        let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
        assert!(obs.abort_requested, "annotation true (any case) aborts");
        assert!(!obs.resume_requested, "only \"true\" approves");
        // The annotation is the one-shot request; spec.approved approves the promotion only.
        exp.metadata.annotations = Some([(ANNOTATION_APPROVE.to_string(), "true".into())].into());
        let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
        assert!(obs.resume_requested && !obs.promotion_approved);
        exp.metadata.annotations = None;
        exp.spec.approved = true;
        let obs = observations(&exp, &fetched(None), jiff::Timestamp::now());
        assert!(obs.promotion_approved && !obs.resume_requested);
    }

    #[test]
    fn replicas_weight_is_the_ready_pod_share() {
        let exp = experiment();
        let mut f = fetched(Some(target(4, 4)));
        let mut candidate = target(2, 2);
        candidate.metadata.name = Some("storefront-candidate".into());
        f.candidate = Some(candidate);
        let obs = observations(&exp, &f, jiff::Timestamp::now());
        assert_eq!(obs.effective_weight, 33);
        assert_eq!(obs.target.unwrap().deployment.replicas, 4);
        assert_eq!(obs.candidate.unwrap().ready_replicas, 2);
    }

    #[test]
    fn spec_errors_name_the_field() {
        let mut exp = experiment();
        exp.spec.container = Some("app".into());
        let err = spec_error(&exp, &fetched(Some(target(6, 6)))).unwrap();
        assert!(err.starts_with("spec.container"), "{err}");

        let mut t = target(6, 6);
        let spec = t.spec.as_mut().unwrap();
        spec.selector.match_labels = None;
        spec.selector.match_expressions = Some(vec![serde_json::from_value(
            json!({"key": "app", "operator": "In", "values": ["storefront"]}),
        )
        .unwrap()]);
        let err = spec_error(&experiment(), &fetched(Some(t))).unwrap();
        assert!(err.contains("matchExpressions"), "{err}");
        assert_eq!(
            spec_error(&experiment(), &fetched(Some(target(6, 6)))),
            None
        );
    }

    #[test]
    fn only_an_older_live_experiment_on_the_same_target_is_a_rival() {
        let first = experiment();
        let mut later = experiment();
        later.metadata.name = Some("later".into());
        later.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-30T02:00:00Z".parse().unwrap(),
            ));
        let all = [Arc::new(first.clone()), Arc::new(later.clone())];
        assert_eq!(rivals(&all, &later), ["storefront-puma-4"]);
        assert!(rivals(&all, &first).is_empty());

        let mut finished = first;
        finished.status = Some(crate::api::ConcurrencyExperimentStatus {
            phase: crate::api::Phase::RolledBack,
            ..Default::default()
        });
        assert!(rivals(&[Arc::new(finished)], &later).is_empty());
    }
}
