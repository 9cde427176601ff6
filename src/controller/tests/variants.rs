//! A selection's variants as observed from the Deployment cache: only the experiment's own
//! objects are variants, each with its share of traffic; someone else's by those names is
//! reported, never taken.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::{experiment, target, NS};
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus, Phase, ServerConfig};
use crate::controller::observe::variants::*;
use crate::plan::DeploymentState;
use crate::workload;

fn puma(workers: i32, threads: i32) -> ServerConfig {
    serde_json::from_value(json!({"server": "puma", "workers": workers, "threads": threads}))
        .unwrap()
}

/// The fixture experiment choosing among puma 1×1, 2×4 and 2×3.
pub fn selection_experiment() -> ConcurrencyExperiment {
    let mut exp = experiment();
    exp.spec.candidate = None;
    exp.spec.candidates = Some(vec![puma(1, 1), puma(2, 4), puma(2, 3)]);
    exp
}

/// `d` as the Deployment controller reports it with every pod ready.
fn rolled_out(mut d: Deployment) -> Deployment {
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    d.metadata.generation = Some(1);
    d.status = serde_json::from_value(json!({
        "observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
    }))
    .unwrap();
    d
}

fn variant(exp: &ConcurrencyExperiment, index: usize) -> Deployment {
    rolled_out(workload::selection_variant_deployment(&target(6, 6), exp, index, 1).unwrap())
}

fn fresh(exp: &ConcurrencyExperiment) -> Deployment {
    rolled_out(workload::fresh_baseline_deployment(&target(6, 6), exp, 1).unwrap())
}

fn objects(candidates: Vec<Option<Deployment>>, fresh: Option<Deployment>) -> VariantObjects {
    let mut candidates = candidates;
    candidates.resize(crate::api::MAX_CANDIDATES, None);
    VariantObjects {
        candidates,
        fresh_baseline: fresh,
    }
}

fn split<'a>(target: &'a Deployment) -> Split<'a> {
    Split {
        target: Some(target),
        candidate: None,
        route: None,
        services: &[],
        user_service: None,
    }
}

fn foreign(mut d: Deployment) -> Deployment {
    d.metadata.owner_references = None;
    d
}

#[test]
fn each_variant_is_seen_with_its_share_of_the_ready_pods() {
    let exp = selection_experiment();
    let t = target(6, 6);
    // Candidate 3 not made yet; one left at index 5 from a longer list is still seen.
    let mut left = variant(&exp, 0);
    left.metadata.name = Some(workload::variant_name("storefront", 4));
    let objs = objects(
        vec![
            Some(variant(&exp, 0)),
            Some(variant(&exp, 1)),
            None,
            None,
            Some(left),
        ],
        Some(fresh(&exp)),
    );
    let sel = observe(&exp, &objs, &split(&t)).unwrap();
    let one = DeploymentState {
        replicas: 1,
        ready_replicas: 1,
        rolled_out: true,
    };
    let seen: Vec<_> = sel
        .candidates
        .iter()
        .map(|v| (v.deployment.clone(), v.runs_spec_config, v.share))
        .collect();
    // 6 target pods + 4 variant pods behind the user's Service: 10 % each.
    assert_eq!(
        seen,
        [
            (Some(one.clone()), true, 10),
            (Some(one.clone()), true, 10),
            (None, false, 0),
            (None, false, 0),
            (Some(one.clone()), false, 10),
        ]
    );
    assert_eq!(
        (
            sel.fresh_baseline.deployment,
            sel.fresh_baseline.runs_spec_config
        ),
        (Some(one), true)
    );
    // A candidate rendered with another entry's config does not run its spec config.
    let swapped = objects(vec![Some(variant(&exp, 1))], None);
    let sel = observe(&exp, &swapped, &split(&t)).unwrap();
    assert!(!sel.candidates[0].runs_spec_config);
    assert_eq!(
        sel.candidates.len(),
        3,
        "one entry per spec.candidates at least"
    );
}

#[test]
fn a_fresh_baseline_copied_from_an_older_template_is_not_current() {
    let exp = selection_experiment();
    let mut changed = target(6, 6);
    let pod = changed
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    pod.containers[0].image = Some("registry.example/storefront:1.5".into());
    let objs = objects(vec![], Some(fresh(&exp)));
    let sel = observe(&exp, &objs, &split(&changed)).unwrap();
    assert!(sel.fresh_baseline.deployment.is_some());
    assert!(!sel.fresh_baseline.runs_spec_config);
}

/// The variants' objects not ours, as the observation reports them.
fn not_ours_among(
    exp: &ConcurrencyExperiment,
    objs: &VariantObjects,
    user: Option<&Service>,
    services: &[Service],
) -> Vec<String> {
    let c = claimed(exp, objs, user);
    crate::controller::observe::owner::not_ours(exp, c.deployments, &c.services, services)
}

#[test]
fn objects_by_the_variants_names_that_are_not_ours_are_reported_and_not_observed() {
    let mut exp = selection_experiment();
    let t = target(6, 6);
    let objs = objects(
        vec![None, Some(foreign(variant(&exp, 1)))],
        Some(foreign(fresh(&exp))),
    );
    let sel = observe(&exp, &objs, &split(&t)).unwrap();
    assert_eq!(sel.candidates[1].deployment, None);
    assert_eq!(sel.fresh_baseline.deployment, None);
    assert_eq!(
        not_ours_among(&exp, &objs, None, &[]),
        [
            "Deployment storefront-candidate-2",
            "Deployment storefront-fresh-baseline"
        ]
    );
    // After the choice nothing is made by a candidate's name any more: someone's Deployment
    // there is no concern; the fresh baseline still is.
    exp.status = Some(ConcurrencyExperimentStatus {
        phase: Phase::Progressing,
        ..Default::default()
    });
    assert_eq!(
        not_ours_among(&exp, &objs, None, &[]),
        ["Deployment storefront-fresh-baseline"]
    );
    // A single-candidate experiment without a fresh baseline has no variants at all.
    let single = experiment();
    assert_eq!(
        not_ours_among(&single, &objs, None, &[]),
        Vec::<String>::new()
    );
    assert_eq!(observe(&single, &objects(vec![], None), &split(&t)), None);
}

fn service(name: &str, owner: Option<&ConcurrencyExperiment>, variant: &str) -> Service {
    let mut s: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"concurrency.dev/variant": variant}},
        "spec": {"selector": {"app": "storefront"}, "ports": [{"port": 80}]},
    }))
    .unwrap();
    if let Some(exp) = owner {
        s.metadata.owner_references = Some(vec![workload::experiment_owner_ref(exp).unwrap()]);
    }
    s
}

#[test]
fn gateway_shares_are_the_route_weights_of_the_variant_services() {
    let mut exp = selection_experiment();
    exp.spec.traffic =
        serde_json::from_value(json!({"router": "gatewayAPI", "httpRoute": "storefront"})).unwrap();
    let t = target(6, 6);
    let route = json!({
        "metadata": {"name": "storefront", "namespace": NS},
        "spec": {"rules": [{"backendRefs": [
            {"name": "storefront-baseline", "port": 80, "weight": 60},
            {"name": "storefront-candidate-1", "port": 80, "weight": 10},
            {"name": "storefront-candidate-3", "port": 80, "weight": 20},
            {"name": "web-fresh-baseline", "port": 80, "weight": 10},
        ]}]},
    });
    let user = service("storefront", None, "");
    let services = vec![
        user.clone(),
        service("web-fresh-baseline", Some(&exp), "fresh-baseline"),
    ];
    let objs = objects(
        vec![
            Some(variant(&exp, 0)),
            Some(variant(&exp, 1)),
            Some(variant(&exp, 2)),
        ],
        Some(fresh(&exp)),
    );
    let sel = observe(
        &exp,
        &objs,
        &Split {
            route: Some(&route),
            services: &services,
            user_service: Some(&user),
            ..split(&t)
        },
    )
    .unwrap();
    let shares: Vec<i32> = sel.candidates.iter().map(|v| v.share).collect();
    assert_eq!(shares, [10, 0, 20]);
    // The fresh baseline's Service is the one it made (by owner and label), whatever its name.
    assert_eq!(sel.fresh_baseline.share, 10);
    // Someone else's Service by a variant's name is reported.
    let theirs = vec![user.clone(), service("storefront-candidate-2", None, "x")];
    assert_eq!(
        not_ours_among(&exp, &objs, Some(&user), &theirs),
        ["Service storefront-candidate-2"]
    );
}

#[test]
fn a_route_split_by_a_selection_is_never_reported_as_the_original() {
    use crate::controller::observe::fetch::Fetched;
    let mut exp = selection_experiment();
    exp.spec.traffic =
        serde_json::from_value(json!({"router": "gatewayAPI", "httpRoute": "storefront"})).unwrap();
    let route = |refs: serde_json::Value| {
        json!({
            "metadata": {"name": "storefront", "namespace": NS},
            "spec": {"rules": [{"backendRefs": refs}]},
        })
    };
    let user = service("storefront", None, "");
    let fetched = |route: serde_json::Value| Fetched {
        target: Some(target(6, 6)),
        route: Some(route),
        service: Some(user.clone()),
        services: vec![
            user.clone(),
            service("storefront-baseline", Some(&exp), "baseline"),
            service("storefront-fresh-baseline", Some(&exp), "fresh-baseline"),
        ],
        ..Fetched::default()
    };
    let now = jiff::Timestamp::now();
    let original = fetched(route(json!([{"name": "storefront", "port": 80}])));
    let obs = crate::controller::observe::observations::observations(&exp, &original, now);
    assert_eq!(
        obs.route_backend_refs.as_deref(),
        Some(r#"[[{"name":"storefront","port":80}]]"#)
    );
    let split = fetched(route(json!([
        {"name": "storefront-baseline", "port": 80, "weight": 90},
        {"name": "storefront-fresh-baseline", "port": 80, "weight": 10},
    ])));
    let obs = crate::controller::observe::observations::observations(&exp, &split, now);
    assert_eq!(obs.route_backend_refs, None);
}
