use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;

use crate::controller::observe::cpu_limits;
use crate::controller::prometheus::*;
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
    clients.client(&url(0), t, &metrics).unwrap();
    clients.client(&url(0), t, &metrics).unwrap();
    assert_eq!(clients.urls(), [url(0)], "reused");
    clients
        .client(&url(0), Duration::from_secs(5), &metrics)
        .unwrap();
    assert_eq!(clients.urls().len(), 2, "another timeout is another client");
    assert!(clients.client("not a url", t, &metrics).is_err());
    assert_eq!(clients.urls().len(), 2, "a bad URL is not kept");
    for i in 1..=MAX_PROMETHEUS_CLIENTS {
        clients.client(&url(i), t, &metrics).unwrap();
        // url(0) with the default timeout stays in use throughout.
        clients.client(&url(0), t, &metrics).unwrap();
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
        .client(&url, Duration::from_secs(5), &metrics)
        .unwrap();
    assert!(client.query_value("up", Timestamp::now()).await.is_err());
    let text = metrics.encode();
    assert!(
        text.contains("concurrency_prometheus_query_duration_seconds_count 1"),
        "{text}"
    );
}
