//! Turn what was fetched (`fetch`, the only I/O) into `plan::Observations`: pure, so that the
//! rules for abort/approve, spec errors and the effective weight are plain unit tests.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Container, Service};
use kube::{Resource, ResourceExt};

use super::fetch::Fetched;
use super::owner::{self, owned_by};
use super::variants::{self, ServiceNames};
use crate::api::{
    ConcurrencyExperiment, ServerConfig, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY,
};
use crate::plan::{self, Observations, TargetState};
use crate::traffic;
use crate::workload;

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
/// named `<target>-candidate`, Services `<svc>-baseline`/`<svc>-candidate` (gatewayAPI), and
/// a selection's variants (`variants::claimed`), by `owner::not_ours`.
pub fn not_ours(exp: &ConcurrencyExperiment, fetched: &Fetched) -> Vec<String> {
    let user = fetched.service.as_ref();
    let mut services = Vec::new();
    if let Some(service) = user.filter(|_| exp.spec.traffic.router.uses_route()) {
        services.push(workload::baseline_service_name(&service.name_any()));
        services.push(workload::candidate_service_name(&service.name_any()));
    }
    let variants = variants::claimed(exp, &fetched.variants, user);
    services.extend(variants.services);
    let deployments = fetched.candidate.iter().chain(variants.deployments);
    owner::not_ours(exp, deployments, &services, &fetched.services)
}

/// The candidate Deployment, if this experiment made it.
fn our_candidate<'a>(exp: &ConcurrencyExperiment, fetched: &'a Fetched) -> Option<&'a Deployment> {
    fetched.candidate.as_ref().filter(|c| owned_by(*c, exp))
}

/// The candidate the stages walk (after a selection, its winner).
fn walked(exp: &ConcurrencyExperiment) -> &ServerConfig {
    exp.spec.walked_candidate(exp.status.as_ref())
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
    // Server flags that cannot be rewritten would leave a candidate on the baseline's config:
    // every candidate a selection may choose is checked before anything runs.
    let configs = match exp.spec.selects() {
        true => exp.spec.candidate_list().iter().collect(),
        false => vec![walked(exp)],
    };
    let rendered = workload::app_container_index(target, container)
        .and_then(|_| workload::target_match_labels(target))
        .and_then(|_| {
            configs
                .iter()
                .try_for_each(|c| workload::promoted_template(target, c, container).map(|_| ()))
        });
    if let Err(e) = rendered {
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
    // A fresh baseline beside the candidate serves the baseline's config: its pods and its
    // route weight are the baseline's side of the split.
    let fresh = fetched
        .variants
        .fresh_baseline
        .as_ref()
        .filter(|d| owned_by(*d, exp));
    let fresh_service = ServiceNames::new(exp, &fetched.services, fetched.service.as_ref())
        .map(|n| n.fresh_baseline);
    let route_weight = match (&fetched.route, variant_service_names(exp, fetched)) {
        (Some(route), Some((baseline, candidate))) => {
            let split = traffic::route_weight(route, &baseline, &candidate);
            match (split, fresh_service) {
                (Some(_), Some(f)) => {
                    let shares = traffic::route_shares(route, &[&baseline, &candidate, &f]);
                    shares.get(1).copied()
                }
                (split, _) => split,
            }
        }
        _ => None,
    };
    exp.spec.traffic.router.effective_weight(
        ready(our_candidate(exp, fetched)),
        ready(fetched.target.as_ref()) + ready(fresh),
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

/// The route sends traffic to a Service this experiment made (a selection's split names no
/// candidate Service, so `original_route_refs` alone would not see it): not the original.
fn routes_to_ours(exp: &ConcurrencyExperiment, fetched: &Fetched) -> bool {
    let Some(route) = &fetched.route else {
        return false;
    };
    let in_route = traffic::route_services(route);
    owned_services(exp, fetched).any(|s| in_route.contains(&s.name_any()))
}

/// The app container's CPU limit (cores) in the baseline and in the candidate the stages
/// walk: the candidate gets its `resources` in place of the target's when they are set.
pub fn cpu_limits(
    exp: &ConcurrencyExperiment,
    target_container: &Container,
) -> (Option<f64>, Option<f64>) {
    let baseline = crate::analysis::cpu_limit(target_container.resources.as_ref());
    let config = exp.spec.walked_candidate(exp.status.as_ref());
    (baseline, variant_cpu_limit(config, baseline))
}

/// A variant's CPU limit: its own `resources` replace the target's whole when given.
pub fn variant_cpu_limit(config: &ServerConfig, baseline: Option<f64>) -> Option<f64> {
    match &config.resources {
        Some(r) => crate::analysis::cpu_limit(Some(r)),
        None => baseline,
    }
}

/// The HPA's rule on the candidate's pods, when their usage was fetched (100 %, `replicas`).
fn candidate_need(hpa: &HorizontalPodAutoscaler, fetched: &Fetched) -> Option<workload::Need> {
    let usage = fetched.candidate_usage.as_deref()?;
    let candidate = fetched.candidate.as_ref()?;
    let (metrics, _) = workload::resource_metrics(hpa);
    workload::replicas_needed(&metrics, &workload::template_requests(candidate), usage)
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
    // Once promoting, the judged config, whatever the spec says now.
    let promoted = exp.promoted_candidate();
    // A target whose app container is gone is still the target: it must be restored.
    let target = fetched.target.as_ref().map(|d| TargetState {
        deployment: workload::rollout_state(d),
        baseline: workload::read_baseline(d, container, &fetched.configmaps).ok(),
        runs_candidate_config: workload::runs_config(d, promoted, container),
        template_hash: template_hash(d),
        promoted_hash: workload::promoted_fingerprint(d, promoted, container),
        promotion_patch: workload::promotion_patch(d, promoted, container).ok(),
        deleting: d.metadata.deletion_timestamp.is_some(),
    });
    Observations {
        now,
        generation: exp.meta().generation.unwrap_or_default(),
        deleting_since: exp.meta().deletion_timestamp.as_ref().map(|t| t.0),
        namespace_terminating: false,
        abort_requested: exp.spec.abort || exp.flag(ANNOTATION_ABORT),
        promotion_approved: exp.spec.approved,
        resume_requested: exp.flag(ANNOTATION_APPROVE),
        retry_requested: exp.flag(ANNOTATION_RETRY),
        other_experiment: fetched.others.first().cloned(),
        spec_error: spec_error(exp, fetched),
        target,
        // Someone else's Deployment by that name is not the candidate (see `not_ours`).
        candidate: our_candidate(exp, fetched).map(workload::rollout_state),
        candidate_runs_spec_config: our_candidate(exp, fetched)
            .is_some_and(|d| workload::runs_config(d, walked(exp), container)),
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
                candidate_need: candidate_need(h, fetched),
            }
        }),
        effective_weight: effective_weight(exp, fetched),
        route_backend_refs: original_route_refs(fetched).filter(|_| !routes_to_ours(exp, fetched)),
        analysis: None,
        // Measured with the analysis, when there is a fresh baseline to measure.
        baselines: None,
        preflight: None,
        target_rate: None,
        queue_clock: None,
        selection: variants::observe(
            exp,
            &fetched.variants,
            &variants::Split {
                target: fetched.target.as_ref(),
                candidate: our_candidate(exp, fetched),
                route: fetched.route.as_ref(),
                services: &fetched.services,
                user_service: fetched.service.as_ref(),
            },
        ),
    }
}
