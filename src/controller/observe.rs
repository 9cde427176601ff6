//! Fetch what the stage machine needs to see, and turn it into `plan::Observations`.
//!
//! `fetch` is the only I/O here; `observations` and its helpers are pure so that the rules for
//! abort/approve, spec errors and the effective weight are plain unit tests.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Service};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::context::Caches;
use super::error::{is_not_found, Error, Result};
use crate::api::{ConcurrencyExperiment, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY};
use crate::plan::{self, Observations, TargetState};
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
    let target = caches.deployment(&ns, target_name);
    let candidate = caches.deployment(&ns, &workload::candidate_name(target_name));
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

/// True when `obj` has an owner reference to this experiment's UID: the operator made it for
/// this experiment. Labels are no proof — anyone can copy them (a copy of the candidate's
/// manifest, another tool).
pub fn owned_by<K: Resource>(obj: &K, exp: &ConcurrencyExperiment) -> bool {
    exp.uid()
        .is_some_and(|uid| obj.owner_references().iter().any(|r| r.uid == uid))
}

/// The existing Service named `name`, if any (gatewayAPI).
pub fn service_named<'a>(fetched: &'a Fetched, name: &str) -> Option<&'a Service> {
    fetched.services.iter().find(|s| s.name_any() == name)
}

/// The variant Services this experiment made (gatewayAPI), whatever the user's Service is now.
pub fn owned_services<'a>(
    exp: &'a ConcurrencyExperiment,
    fetched: &'a Fetched,
) -> impl Iterator<Item = &'a Service> + 'a {
    fetched
        .services
        .iter()
        .filter(move |s| owned_by(*s, exp) && s.labels().contains_key(workload::LABEL_VARIANT))
}

/// The (baseline, candidate) Service names the route is split between: those this experiment
/// made — found by owner, so a user Service that no longer selects the target (its labels
/// changed) does not hide them — else the ones it would make for the user's Service.
fn variant_service_names(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
) -> Option<(String, String)> {
    let ours = |variant: &str| {
        owned_services(exp, fetched)
            .find(|s| s.labels().get(workload::LABEL_VARIANT).map(String::as_str) == Some(variant))
            .map(|s| s.name_any())
    };
    let derived = fetched.service.as_ref().map(|s| {
        (
            workload::baseline_service_name(&s.name_any()),
            workload::candidate_service_name(&s.name_any()),
        )
    });
    match (
        ours(workload::VARIANT_BASELINE),
        ours(workload::VARIANT_CANDIDATE),
    ) {
        (Some(b), Some(c)) => Some((b, c)),
        (b, c) => derived.map(|(db, dc)| (b.unwrap_or(db), c.unwrap_or(dc))),
    }
}

/// Objects where this experiment would write its own that it did not create: a Deployment
/// named `<target>-candidate`, Services `<svc>-baseline`/`<svc>-candidate` (gatewayAPI). The
/// operator never writes or deletes them; the stage machine refuses to start, or rolls back.
pub fn not_ours(exp: &ConcurrencyExperiment, fetched: &Fetched) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(c) = fetched.candidate.as_ref().filter(|c| !owned_by(*c, exp)) {
        found.push(format!("Deployment {}", c.name_any()));
    }
    if exp.spec.traffic.router.uses_route() {
        if let Some(service) = &fetched.service {
            for name in [
                workload::baseline_service_name(&service.name_any()),
                workload::candidate_service_name(&service.name_any()),
            ] {
                if service_named(fetched, &name).is_some_and(|s| !owned_by(s, exp)) {
                    found.push(format!("Service {name}"));
                }
            }
        }
    }
    found
}

/// The candidate Deployment, if this experiment made it.
fn our_candidate<'a>(exp: &ConcurrencyExperiment, fetched: &'a Fetched) -> Option<&'a Deployment> {
    fetched.candidate.as_ref().filter(|c| owned_by(*c, exp))
}

fn flag(exp: &ConcurrencyExperiment, annotation: &str) -> bool {
    exp.annotations()
        .get(annotation)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Why a spec with `candidates` (or `baseline.fresh`) is `Invalid` in this version.
pub const SELECTION_NOT_RUN: &str = "spec.candidates: this operator version does not run \
     selections or a fresh baseline yet (docs/selection.md); give one spec.candidate";

/// Problems the CRD schema cannot see; each makes the experiment `Invalid`.
pub fn spec_error(exp: &ConcurrencyExperiment, fetched: &Fetched) -> Option<String> {
    if let Some(first) = fetched.rivals.first() {
        return Some(format!(
            "spec.targetRef: experiment {first} already targets Deployment {}; finish or delete it first",
            exp.spec.target_ref.name
        ));
    }
    // The selection's I/O (N candidate Deployments, per-variant analyses, the fresh baseline)
    // is not built yet: refuse before anything is created rather than run half a spec.
    if exp.spec.candidate.is_none() || exp.spec.fresh_baseline() {
        return Some(SELECTION_NOT_RUN.into());
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
        .and_then(|_| workload::promoted_template(target, exp.spec.single_candidate(), container))
    {
        return Some(e.to_string());
    }
    if exp.spec.traffic.router.uses_route() {
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

/// The traffic share the candidate really gets now, as the router sees it.
pub fn effective_weight(exp: &ConcurrencyExperiment, fetched: &Fetched) -> i32 {
    let ready = |d: Option<&Deployment>| {
        d.map(|d| workload::rollout_state(d).ready_replicas)
            .unwrap_or(0)
    };
    let route_weight = match (&fetched.route, variant_service_names(exp, fetched)) {
        (Some(route), Some((baseline, candidate))) => {
            traffic::route_weight(route, &baseline, &candidate)
        }
        _ => None,
    };
    exp.spec.traffic.router.effective_weight(
        ready(our_candidate(exp, fetched)),
        ready(fetched.target.as_ref()),
        route_weight,
    )
}

/// The route's backendRefs while it is still the user's (no rule split between the variant
/// Services of its Service), for the machine to record as the original; `None` without a
/// route or once split.
pub fn original_route_refs(fetched: &Fetched) -> Option<String> {
    let (route, service) = (fetched.route.as_ref()?, fetched.service.as_ref()?);
    // A route the operator already split is not the original; never report that.
    let service = service.name_any();
    let split = traffic::route_weight(
        route,
        &workload::baseline_service_name(&service),
        &workload::candidate_service_name(&service),
    )
    .is_some();
    if split {
        return None;
    }
    traffic::route_backend_refs(route)
        .ok()
        .map(|refs| refs.to_string())
}

/// The app container's CPU limit (cores) in the baseline and in the candidate: the candidate
/// gets `spec.candidate.resources` in place of the target's when they are set.
pub fn cpu_limits(
    exp: &ConcurrencyExperiment,
    target_container: &Container,
) -> (Option<f64>, Option<f64>) {
    let baseline = crate::analysis::cpu_limit(target_container.resources.as_ref());
    let candidate = match &exp.spec.single_candidate().resources {
        Some(r) => crate::analysis::cpu_limit(Some(r)),
        None => baseline,
    };
    (baseline, candidate)
}

/// The fingerprint of the Deployment's pod template, as `status.original.templateHash` keeps it.
pub fn template_hash(d: &Deployment) -> String {
    let template = d
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    workload::TemplateFingerprint::of(&template).to_string()
}

/// Everything but the analysis, which the reconciler adds when it is due.
pub fn observations(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    now: jiff::Timestamp,
) -> Observations {
    let container = exp.spec.container.as_deref();
    // A target whose app container is gone is still the target: it must be restored.
    let target = fetched.target.as_ref().map(|d| TargetState {
        deployment: workload::rollout_state(d),
        baseline: workload::read_baseline(d, container, &fetched.configmaps).ok(),
        runs_candidate_config: workload::runs_config(d, exp.spec.single_candidate(), container),
        template_hash: template_hash(d),
        promoted_hash: workload::promoted_fingerprint(d, exp.spec.single_candidate(), container),
        promotion_patch: workload::promotion_patch(d, exp.spec.single_candidate(), container).ok(),
    });
    Observations {
        now,
        generation: exp.meta().generation.unwrap_or_default(),
        deleting: exp.meta().deletion_timestamp.is_some(),
        abort_requested: exp.spec.abort || flag(exp, ANNOTATION_ABORT),
        promotion_approved: exp.spec.approved,
        resume_requested: flag(exp, ANNOTATION_APPROVE),
        retry_requested: flag(exp, ANNOTATION_RETRY),
        other_experiment: fetched.others.first().cloned(),
        spec_error: spec_error(exp, fetched),
        target,
        // Someone else's Deployment by that name is not the candidate (see `not_ours`).
        candidate: our_candidate(exp, fetched).map(workload::rollout_state),
        candidate_runs_spec_config: our_candidate(exp, fetched)
            .is_some_and(|d| workload::runs_config(d, exp.spec.single_candidate(), container)),
        candidate_problem: fetched.candidate_problem.clone(),
        not_ours: not_ours(exp, fetched),
        candidate_cpu_limit: fetched
            .target
            .as_ref()
            .and_then(|d| workload::app_container(d, container).ok())
            .and_then(|c| cpu_limits(exp, c).1),
        autoscaler: fetched.autoscaler.as_ref().map(|h| {
            let (min_replicas, max_replicas) = workload::bounds(h);
            plan::Autoscaler {
                name: h.name_any(),
                min_replicas,
                max_replicas,
            }
        }),
        effective_weight: effective_weight(exp, fetched),
        route_backend_refs: original_route_refs(fetched),
        analysis: None,
        // Selections are refused (`SELECTION_NOT_RUN`) until their variants are observed.
        selection: None,
    }
}
