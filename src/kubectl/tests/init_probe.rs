//! `kubectl concurrency init --prometheus`: what it asks the app's Prometheus, and the checks,
//! gate and warnings it writes from the answers (canned Prometheus servers).

use pretty_assertions::assert_eq;

use super::fixtures::*;
use super::init::{assert_valid, init_args, puma_2x6, starting};
use crate::analysis::Finding;
use crate::kubectl::cli::InitServer;
use crate::kubectl::init;

/// A yabeda-rails app on Kubernetes, scraped for a while and serving: request series and
/// cAdvisor's, no GVL counters, no Puma plugin, no queue-time header.
async fn yabeda_prometheus() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    canned_prometheus(vec![
        ("(up{", Some(1.0)),
        ("rails_requests_total", Some(3.0)),
        ("rails_request_duration_seconds", Some(3.0)),
        ("container_memory_working_set_bytes", Some(1.0)),
        ("container_cpu_usage_seconds_total", Some(1.0)),
    ])
    .await
}

#[tokio::test]
async fn init_reads_the_target_and_writes_only_the_checks_whose_series_exist() {
    let (url, queries) = yabeda_prometheus().await;
    let (session, seen, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let mut args = init_args(InitServer::Puma, Some(4), None);
    args.prometheus = Some(url.clone());
    args.container = Some("web".into());
    let mut out = Vec::new();
    init::run(&session, &args, &mut out).await.unwrap();
    server.abort();
    assert_eq!(lines(&seen), [format!("GET {DEPLOYMENTS}/storefront")]);
    let yaml = text(out);
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    assert_eq!(names, ["latency", "memory", "errorRate"]);
    assert_eq!(exp.spec.analysis.prometheus.url, url);
    assert_eq!(
        exp.spec.analysis.max_predicted_utilization, "85%",
        "cAdvisor CPU is there"
    );
    assert!(
        yaml.contains("# The target runs now (read back from container web): puma 2×6\n"),
        "{yaml}"
    );
    for check in ["gvlWait", "backlog", "queueTime"] {
        assert!(
            yaml.contains(&format!("# - {{metric: {check}")),
            "{check}: {yaml}"
        );
    }
    // The I/O share of `recommend`'s queries: no GVL counters on a yabeda app, so from the
    // standard metrics (the canned CPU and wall time are equal: 0 %, one thread).
    assert!(
        yaml.contains(
            "# Measured over the last 5m: I/O share 0% (from standard metrics: (wall − CPU) / \
             wall"
        ) && yaml.contains("# Amdahl: 1 threads per process"),
        "{yaml}"
    );
    // The operator's pre-flight lookups and `recommend`'s queries for the target's pods,
    // memory for container web.
    let queries = queries.lock().unwrap().clone();
    assert!(
        queries
            .iter()
            .all(|q| q.contains(r#"namespace="shop",pod=~"^storefront-["#)),
        "{queries:#?}"
    );
    assert!(
        queries
            .iter()
            .any(|q| q.contains("container_memory_working_set_bytes")
                && q.contains(r#"container="web""#)),
        "{queries:#?}"
    );
}

#[tokio::test]
async fn init_says_what_is_missing_and_turns_off_a_gate_it_cannot_feed() {
    let (url, _) = yabeda_prometheus().await;
    let (_, _, p) = probe_starters(&url).await;
    let notes = p.notes.join("\n");
    assert_eq!(p.notes.len(), 3, "{notes}");
    assert!(
        notes.contains("not written: check gvlWait: ruby_gvl_wait_seconds_total")
            && notes.contains("no published gem writes it"),
        "{notes}"
    );
    assert!(notes.contains("check backlog: puma_backlog"), "{notes}");
    assert!(
        notes.contains("check queueTime") && notes.contains("X-Request-Start"),
        "{notes}"
    );
    assert_eq!(p.gate_off, None);

    // No cAdvisor CPU and no GVL counters: the gate would be refused; the starter turns it off.
    let (url, _) = canned_prometheus(vec![
        ("(up{", Some(1.0)),
        ("rails_requests_total", Some(3.0)),
        ("rails_request_duration_seconds", Some(3.0)),
        ("container_memory_working_set_bytes", Some(1.0)),
    ])
    .await;
    let (candidate, _, p) = probe_starters(&url).await;
    let why = p.gate_off.clone().expect("gate off");
    assert!(why.contains("container_cpu_usage_seconds_total"), "{why}");
    let mut s = starting(candidate, Some(p.data));
    s.gate_off = Some(why);
    let yaml = init::manifest(&s);
    assert!(
        yaml.contains("    maxPredictedUtilization: \"off\"\n"),
        "{yaml}"
    );
    assert_eq!(
        assert_valid(&yaml).spec.analysis.max_predicted_utilization,
        "off"
    );
}

/// `init`'s probe of the starters of a Puma 2×6 → 2×4 candidate on `storefront` (container
/// web) against the Prometheus at `url`.
async fn probe_starters(url: &str) -> (crate::api::ServerConfig, Vec<init::Starter>, init::Probed) {
    let client =
        crate::prometheus::PrometheusClient::new(url, std::time::Duration::from_secs(5)).unwrap();
    let candidate =
        init::candidate(&init_args(InitServer::Puma, Some(4), None), &puma_2x6()).unwrap();
    let starters = init::starters(&candidate);
    let target = crate::analysis::preflight::Target {
        namespace: "shop".into(),
        deployment: "storefront".into(),
        container: "web".into(),
        windows: Default::default(),
    };
    let analysis = init::starter_analysis(url, None, &starters).unwrap();
    let p = init::probe(
        &client,
        &analysis,
        &starters,
        &target,
        jiff::Timestamp::now(),
    )
    .await
    .unwrap();
    (candidate, starters, p)
}

#[tokio::test]
async fn init_leaves_out_a_queue_time_stamped_in_whole_seconds() {
    // The queue-time series exist, but 10 % of 2,000 requests waited ≤ 100 ms, 50 % ≤ 500 ms
    // and all ≤ 1 s: an ALB-style arrival second.
    let buckets: Vec<(String, f64)> = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
        .iter()
        .map(|le| (le.to_string(), 2000.0 * f64::min(*le, 1.0)))
        .chain([("+Inf".to_string(), 2000.0)])
        .collect();
    let (url, queries) = canned_prometheus_with(
        vec![
            ("(up{", Some(1.0)),
            ("rails_requests_total", Some(3.0)),
            ("rails_request_duration_seconds", Some(3.0)),
            ("rails_request_queue_time_seconds", Some(1.0)),
            ("container_memory_working_set_bytes", Some(1.0)),
            ("container_cpu_usage_seconds_total", Some(1.0)),
        ],
        vec![("increase(rails_request_queue_time_seconds_bucket", buckets)],
    )
    .await;
    let (_, starters, p) = probe_starters(&url).await;
    let queue = starters
        .iter()
        .position(|s| s.yaml.contains("queueTime"))
        .unwrap();
    assert!(
        matches!(&p.data[queue], Finding::Missing(m) if m.contains("one-second clock")),
        "{:?}",
        p.data[queue]
    );
    let notes = p.notes.join("\n");
    assert!(
        notes.contains("not written: check queueTime: queue time looks like a one-second clock (10 % ≤ 100 ms, 50 % ≤ 500 ms, 100 % ≤ 1 s of 2000 requests)"),
        "{notes}"
    );
    let asked = queries.lock().unwrap().clone();
    assert!(
        asked.iter().any(|q| q
            .starts_with("sum by (le) (increase(rails_request_queue_time_seconds_bucket{")
            && q.contains("[5m]")),
        "{asked:#?}"
    );
}
