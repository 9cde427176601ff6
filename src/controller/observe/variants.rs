//! A selection's variants (docs/selection.md) as the shell sees them: each candidate's and the
//! fresh baseline's Deployment, looked up by name in the Deployment cache (no list per
//! reconcile), their Services (`gatewayAPI`), and the share of traffic each gets now. Only
//! objects with an owner reference to the experiment are variants; one by these names that is
//! not is reported (`owner::not_ours`, with the names from `claimed`) and never written or
//! deleted.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde_json::Value;

use super::super::context::Caches;
use super::super::error::Result;
use super::owner::{owned_by, owned_variant_service};
use crate::api::{ConcurrencyExperiment, Phase, MAX_CANDIDATES};
use crate::plan::{SelectionObservations, VariantObservation};
use crate::{traffic, workload};

/// The variants' Deployments by their names, whoever owns them.
#[derive(Clone, Debug, Default)]
pub struct VariantObjects {
    /// By index into `spec.candidates`, for every index a selection can have: a variant left
    /// from an entry since removed from the list is still seen, so it is removed.
    pub candidates: Vec<Option<Deployment>>,
    pub fresh_baseline: Option<Deployment>,
}

/// Reads the variants from the Deployment cache.
pub async fn fetch(
    client: &kube::Client,
    caches: &Caches,
    namespace: &str,
    target: &str,
) -> Result<VariantObjects> {
    let mut candidates = Vec::with_capacity(MAX_CANDIDATES);
    for i in 0..MAX_CANDIDATES {
        let name = workload::variant_name(target, i);
        candidates.push(caches.deployment(client, namespace, &name).await?);
    }
    let fresh_baseline = workload::fresh_baseline_name(target);
    Ok(VariantObjects {
        candidates,
        fresh_baseline: caches
            .deployment(client, namespace, &fresh_baseline)
            .await?,
    })
}

/// What `observe` reads besides the variants: the rest of the split.
pub struct Split<'a> {
    pub target: Option<&'a Deployment>,
    /// The candidate the stages walk, when it is this experiment's.
    pub candidate: Option<&'a Deployment>,
    pub route: Option<&'a Value>,
    pub services: &'a [Service],
    /// The user's Service in front of the target (`gatewayAPI`).
    pub user_service: Option<&'a Service>,
}

/// The Services a `gatewayAPI` selection splits the route between: those this experiment
/// made, found by owner and label, else the names it would give them for the user's Service.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceNames {
    /// `<svc>-baseline`: the target's own pods (pinned to its ReplicaSet).
    pub baseline: String,
    /// `<svc>-candidate`: the candidate the stages walk.
    pub candidate: String,
    /// By index into `spec.candidates`, as many as `VariantObjects::candidates`.
    pub candidates: Vec<String>,
    pub fresh_baseline: String,
}

impl ServiceNames {
    pub fn new(
        exp: &ConcurrencyExperiment,
        services: &[Service],
        user_service: Option<&Service>,
    ) -> Option<Self> {
        let user = user_service.map(|s| s.name_any());
        let name = |label: &str, derive: &dyn Fn(&str) -> String| {
            owned_variant_service(exp, services, label)
                .map(|s| s.name_any())
                .or_else(|| user.as_deref().map(derive))
        };
        Some(Self {
            baseline: name(workload::VARIANT_BASELINE, &workload::baseline_service_name)?,
            candidate: name(
                workload::VARIANT_CANDIDATE,
                &workload::candidate_service_name,
            )?,
            candidates: (0..MAX_CANDIDATES)
                .map(|i| {
                    name(&workload::variant_label(i), &|s| {
                        workload::variant_service_name(s, i)
                    })
                })
                .collect::<Option<_>>()?,
            fresh_baseline: name(
                workload::VARIANT_FRESH_BASELINE,
                &workload::fresh_baseline_service_name,
            )?,
        })
    }
}

fn ours<'a>(d: &'a Option<Deployment>, exp: &ConcurrencyExperiment) -> Option<&'a Deployment> {
    d.as_ref().filter(|d| owned_by(*d, exp))
}

fn ready(d: Option<&Deployment>) -> i32 {
    d.map_or(0, |d| workload::rollout_state(d).ready_replicas)
}

/// The selection as the stage machine sees it; `None` for an experiment that neither selects
/// nor runs a fresh baseline and has no variant left.
pub fn observe(
    exp: &ConcurrencyExperiment,
    objects: &VariantObjects,
    split: &Split,
) -> Option<SelectionObservations> {
    let candidates: Vec<Option<&Deployment>> =
        objects.candidates.iter().map(|d| ours(d, exp)).collect();
    let fresh = ours(&objects.fresh_baseline, exp);
    let any_left = fresh.is_some() || candidates.iter().any(Option::is_some);
    if !(exp.spec.selects() || exp.spec.fresh_baseline() || any_left) {
        return None;
    }
    let router = exp.spec.traffic.router;
    let route_shares: Option<Vec<i32>> = router
        .uses_route()
        .then(|| ServiceNames::new(exp, split.services, split.user_service))
        .flatten()
        .zip(split.route)
        .map(|(names, route)| {
            // The stage's candidate last: a share is of everything the route splits.
            let mut all: Vec<&str> = vec![&names.baseline, &names.fresh_baseline];
            all.extend(names.candidates.iter().map(String::as_str));
            all.push(&names.candidate);
            traffic::route_shares(route, &all)
        });
    // Behind the user's Service every ready pod with the target's labels takes its part.
    let all_ready = ready(split.target)
        + ready(split.candidate)
        + ready(fresh)
        + candidates.iter().map(|d| ready(*d)).sum::<i32>();
    // Route position: 0 is the baseline's, 1 the fresh baseline's, then the candidates.
    let share = |d: Option<&Deployment>, position: usize| match &route_shares {
        _ if router.splits_by_pods() => traffic::percent(ready(d), all_ready),
        Some(shares) => shares.get(position).copied().unwrap_or(0),
        None => 0,
    };
    let container = exp.spec.container.as_deref();
    let list = exp.spec.candidate_list();
    // Trailing indexes with nothing to observe beyond the list are left out.
    let len = candidates
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |i| i + 1)
        .max(list.len());
    let candidates = candidates
        .iter()
        .take(len)
        .enumerate()
        .map(|(i, d)| VariantObservation {
            deployment: d.map(workload::rollout_state),
            runs_spec_config: d
                .zip(list.get(i))
                .is_some_and(|(d, c)| workload::runs_config(d, c, container)),
            share: share(*d, i + 2),
        })
        .collect();
    let fresh_baseline = VariantObservation {
        deployment: fresh.map(workload::rollout_state),
        runs_spec_config: fresh
            .zip(split.target)
            .is_some_and(|(f, t)| workload::copies_target_template(f, t)),
        share: share(fresh, 1),
    };
    Some(SelectionObservations {
        candidates,
        fresh_baseline,
        analysis: None,
    })
}

/// The names a selection's variants take, for `owner::not_ours`: its candidates' Deployments
/// while it may still create them (Pending, Selecting), the fresh baseline's while the spec
/// has one, and their Services (`gatewayAPI`).
pub struct Claimed<'a> {
    /// The Deployments found by those names (the rule decides which are not ours).
    pub deployments: Vec<&'a Deployment>,
    pub services: Vec<String>,
}

pub fn claimed<'a>(
    exp: &ConcurrencyExperiment,
    objects: &'a VariantObjects,
    user_service: Option<&Service>,
) -> Claimed<'a> {
    let phase = exp.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let selecting = exp.spec.selects() && matches!(phase, Phase::Pending | Phase::Selecting);
    let count = if selecting {
        exp.spec.candidate_list().len()
    } else {
        0
    };
    let fresh = exp.spec.fresh_baseline();
    let mut deployments: Vec<&Deployment> = objects
        .candidates
        .iter()
        .take(count)
        .filter_map(Option::as_ref)
        .collect();
    if fresh {
        deployments.extend(objects.fresh_baseline.as_ref());
    }
    let mut services = Vec::new();
    if let Some(user) = user_service.filter(|_| exp.spec.traffic.router.uses_route()) {
        let user = user.name_any();
        services.extend((0..count).map(|i| workload::variant_service_name(&user, i)));
        if fresh {
            services.push(workload::fresh_baseline_service_name(&user));
        }
    }
    Claimed {
        deployments,
        services,
    }
}
