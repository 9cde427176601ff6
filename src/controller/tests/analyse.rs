use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;

use crate::controller::observe::observations::cpu_limits;
use crate::controller::prometheus::*;
use crate::prometheus::Provider;
use crate::telemetry::Metrics;

#[test]
fn the_candidate_has_its_own_cpu_limit_only_when_it_sets_resources() {
    let mut exp = super::fixtures::experiment();
    let container: Container = serde_json::from_value(serde_json::json!({
        "name": "web", "resources": {"limits": {"cpu": "500m"}}
    }))
    .unwrap();
    assert_eq!(cpu_limits(&exp, &container), (Some(0.5), Some(0.5)));
    // Resources given replace the target's whole: no cpu limit there is none at all.
    exp.spec.candidate.as_mut().unwrap().resources =
        Some(serde_json::from_value(serde_json::json!({"limits": {"memory": "1Gi"}})).unwrap());
    assert_eq!(cpu_limits(&exp, &container), (Some(0.5), None));
    exp.spec.candidate.as_mut().unwrap().resources =
        Some(serde_json::from_value(serde_json::json!({"limits": {"cpu": "2"}})).unwrap());
    assert_eq!(cpu_limits(&exp, &container), (Some(0.5), Some(2.0)));
}

#[test]
fn clients_are_kept_per_url_and_timeout_and_bounded() {
    let clients = PrometheusClients::default();
    let metrics = Metrics::new();
    let t = Duration::from_secs(10);
    let url = |i: usize| format!("http://prometheus-{i}.monitoring:9090");
    let client = |u: &str, t| clients.client_for(&Provider::from_url(u), t, &metrics);
    client(&url(0), t).unwrap();
    client(&url(0), t).unwrap();
    assert_eq!(clients.urls(), [url(0)], "reused");
    client(&url(0), Duration::from_secs(5)).unwrap();
    assert_eq!(clients.urls().len(), 2, "another timeout is another client");
    assert!(client("not a url", t).is_err());
    assert_eq!(clients.urls().len(), 2, "a bad URL is not kept");
    for i in 1..=MAX_PROMETHEUS_CLIENTS {
        client(&url(i), t).unwrap();
        // url(0) with the default timeout stays in use throughout.
        client(&url(0), t).unwrap();
    }
    let urls = clients.urls();
    assert_eq!(urls.len(), MAX_PROMETHEUS_CLIENTS);
    assert_eq!(urls.last(), Some(&url(0)), "the one in use is kept");
    assert!(
        !urls.contains(&url(1)),
        "the least recently used went first"
    );
}

#[tokio::test]
async fn queries_are_timed_into_the_histogram() {
    let clients = PrometheusClients::default();
    let metrics = Metrics::new();
    // Nothing listens there: the query fails fast, and still counts.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let client = clients
        .client_for(&Provider::from_url(&url), Duration::from_secs(5), &metrics)
        .unwrap();
    assert!(client.query_value("up", Timestamp::now()).await.is_err());
    let text = metrics.encode();
    assert!(
        text.contains("concurrency_prometheus_query_duration_seconds_count 1"),
        "{text}"
    );
}

#[test]
fn a_selection_interval_judges_each_observed_survivor_against_the_fresh_baseline() {
    use crate::api::{ConcurrencyExperimentStatus, Elimination, SelectionStatus, SelectionVariant};
    use crate::controller::analyse::selection_context;
    use crate::controller::observe::fetch::Fetched;
    use crate::plan::{DeploymentState, SelectionObservations, VariantObservation};
    let mut exp = super::variants::selection_experiment();
    // Candidate 3 (puma 2×3) brings its own CPU limit.
    exp.spec.candidates.as_mut().unwrap()[2].resources =
        Some(serde_json::from_value(serde_json::json!({"limits": {"cpu": "2"}})).unwrap());
    let mut target = super::fixtures::target(6, 6);
    let pod = target
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    pod.containers[0].resources =
        Some(serde_json::from_value(serde_json::json!({"limits": {"cpu": "1"}})).unwrap());
    let fetched = Fetched {
        target: Some(target),
        ..Fetched::default()
    };
    // Candidate 1 was eliminated; candidate 2 has no Deployment yet.
    let variant = |i: i32, out: bool| SelectionVariant {
        index: i,
        eliminated: out.then(|| Elimination {
            at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
            checks: vec!["latency".into()],
            message: String::new(),
        }),
        ..Default::default()
    };
    let status = ConcurrencyExperimentStatus {
        selection: Some(SelectionStatus {
            variants: vec![variant(0, true), variant(1, false), variant(2, false)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let seen = |share: i32, exists: bool| VariantObservation {
        deployment: exists.then(DeploymentState::default),
        runs_spec_config: exists,
        share,
    };
    let observed = SelectionObservations {
        candidates: vec![seen(10, true), seen(0, false), seen(11, true)],
        fresh_baseline: seen(12, true),
        analysis: None,
    };
    let now = Timestamp::UNIX_EPOCH;
    let sctx = selection_context(&exp, &fetched, &status, &observed, now)
        .unwrap()
        .unwrap();
    assert_eq!(sctx.target_deployment, "storefront");
    assert_eq!(
        (sctx.base.baseline_deployment.as_str(), sctx.base.weight),
        ("storefront-fresh-baseline", 12)
    );
    assert_eq!(sctx.base.baseline_cpu_limit, Some(1.0));
    let judged: Vec<_> = sctx
        .candidates
        .iter()
        .map(|c| (c.index, c.deployment.as_str(), c.weight, c.cpu_limit))
        .collect();
    assert_eq!(judged, [(2, "storefront-candidate-3", 11, Some(2.0))]);
    assert_eq!(sctx.candidates[0].config.summary(), "puma 2×3");
}

#[test]
fn a_stage_beside_a_ready_fresh_baseline_is_judged_against_it() {
    use crate::api::{BaselineSpec, ConcurrencyExperimentStatus, OriginalState};
    use crate::controller::analyse::analysis_context;
    use crate::controller::observe::fetch::Fetched;
    use crate::controller::observe::observations::effective_weight;
    let mut exp = super::fixtures::experiment();
    exp.spec.baseline = Some(BaselineSpec { fresh: true });
    let target = super::fixtures::target(4, 4);
    let mut fresh = crate::workload::fresh_baseline_deployment(&target, &exp, 1).unwrap();
    fresh.status = serde_json::from_value(serde_json::json!({"readyReplicas": 1})).unwrap();
    let mut candidate = crate::workload::candidate_deployment(&target, &exp, 2).unwrap();
    candidate.status = serde_json::from_value(serde_json::json!({"readyReplicas": 2})).unwrap();
    let mut fetched = Fetched {
        target: Some(target),
        candidate: Some(candidate),
        ..Fetched::default()
    };
    fetched.variants.fresh_baseline = Some(fresh);
    let at_stage = |index: i32| ConcurrencyExperimentStatus {
        stage_index: Some(index),
        original: Some(OriginalState {
            replicas: 6,
            ..Default::default()
        }),
        ..Default::default()
    };
    let baseline = |fetched: &Fetched, status: &ConcurrencyExperimentStatus| {
        let ctx = analysis_context(&exp, fetched, status, 30, Timestamp::UNIX_EPOCH);
        ctx.unwrap().unwrap().baseline_deployment
    };
    assert_eq!(
        baseline(&fetched, &at_stage(0)),
        "storefront-fresh-baseline"
    );
    // At 100 % (the default third stage) no fresh baseline is kept: the target's values.
    assert_eq!(baseline(&fetched, &at_stage(2)), "storefront");
    // Its pod serves the baseline's side: 2 candidate pods of 4 + 1 + 2.
    assert_eq!(effective_weight(&exp, &fetched), 29);
    // Someone else's Deployment by that name is never the reference.
    fetched
        .variants
        .fresh_baseline
        .as_mut()
        .unwrap()
        .metadata
        .owner_references = None;
    assert_eq!(baseline(&fetched, &at_stage(0)), "storefront");
    assert_eq!(effective_weight(&exp, &fetched), 33);
}
