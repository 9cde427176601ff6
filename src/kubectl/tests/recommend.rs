use crate::api::MetricNames;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::kubectl::cli::RecommendArgs;
use crate::kubectl::recommend;
use crate::kubectl::recommend::*;

fn target(cpu_limit: Option<f64>) -> recommend::Target {
    recommend::Target {
        deployment: "storefront".into(),
        namespace: "shop".into(),
        container: "web".into(),
        config: crate::api::RenderedServer {
            server: crate::api::ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..Default::default()
        },
        replicas: 3,
        ready: 3,
        cpu_limit,
    }
}

fn settings() -> recommend::ReportSettings {
    recommend::ReportSettings {
        prometheus: "http://prometheus.monitoring:9090".into(),
        window: std::time::Duration::from_secs(300),
        min_gain: 0.05,
        async_above: 0.95,
    }
}

#[test]
fn the_recommendation_report_has_the_amdahl_table_and_the_capacity_per_thread_count() {
    let t = target(None);
    let queries =
        recommend::queries(&t, &Default::default(), std::time::Duration::from_secs(300)).unwrap();
    let m = recommend::Measurement {
        io_share: Some(0.52),
        cpu: Some(0.076),
        io: Some(0.104),
        busiest_pod_rate: Some(12.0),
        ..Default::default()
    };
    let (report, missing) = recommend::report(&t, &m, &queries, &settings());
    assert!(missing.is_empty());
    assert_eq!(
        report,
        format!(
            "\
Deployment storefront in namespace shop, container web: puma 2×6 (3/3 ready), CPU limit none
Measured over the last 5m from http://prometheus.monitoring:9090:
  I/O share p      52.0%       io / (running + io + gvlWait)
  CPU per request  76ms        running (GVL held) seconds per request
  I/O per request  104ms       I/O wait seconds per request
  busiest pod      12.0 req/s  requests per second

{}
Capacity per pod at 76ms CPU + 104ms I/O per request, 2 workers:
a Puma worker with t threads ≈ min(t / (cpu + io), 1 / cpu), a Falcon worker ≈ 1 / cpu; the pod = workers × that, capped by the CPU limit (limit / cpu)
SERVER  THREADS  PER WORKER  PER POD     BOUND    HEADROOM
puma    1        5.6 req/s   11.1 req/s  threads  -8%
puma    2        11.1 req/s  22.2 req/s  threads  46%
puma    3        13.2 req/s  26.3 req/s  GVL      54%
puma    4        13.2 req/s  26.3 req/s  GVL      54%       ← recommended (Amdahl)
puma    5        13.2 req/s  26.3 req/s  GVL      54%
puma    6        13.2 req/s  26.3 req/s  GVL      54%       ← now
puma    7        13.2 req/s  26.3 req/s  GVL      54%
puma    8        13.2 req/s  26.3 req/s  GVL      54%
falcon  -        13.2 req/s  26.3 req/s  GVL      54%
Headroom = 1 − busiest pod's rate (12.0 req/s) / capacity; negative: the pod serves more than the estimate.
",
            crate::analysis::recommendation_table(0.52, 0.05, 0.95)
        )
    );
    // A CPU limit of 1.5 cores caps every pod at 1.5 / 76ms = 19.7 req/s.
    let (report, _) = recommend::report(&target(Some(1.5)), &m, &queries, &settings());
    assert!(report.contains("CPU limit 1.5 cores\n"), "{report}");
    assert!(
        report.contains("puma    2        11.1 req/s  19.7 req/s  CPU limit  39%\n"),
        "{report}"
    );
}

#[test]
fn missing_data_names_the_query_that_returned_nothing() {
    let t = target(None);
    let queries =
        recommend::queries(&t, &Default::default(), std::time::Duration::from_secs(300)).unwrap();
    let m = recommend::Measurement {
        io_share: Some(0.52),
        cpu: None,
        io: Some(0.104),
        busiest_pod_rate: None,
        ..Default::default()
    };
    let (report, missing) = recommend::report(&t, &m, &queries, &settings());
    // CPU per request has neither source; I/O per request came from the counters alone.
    assert_eq!(
        missing,
        [
            "CPU per request",
            "busiest pod rate",
            "container CPU per request"
        ]
    );
    assert!(report.contains("  CPU per request  no data"), "{report}");
    assert!(
        report.contains("\nCapacity: needs CPU and I/O per request.\n"),
        "{report}"
    );
    assert!(
        report.ends_with(
            "\nNo data (the query returned nothing, or NaN for no requests):\n  \
             CPU per request: sum(rate(ruby_running_seconds_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m])) \
             / sum(rate(rails_requests_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m]))\n  \
             busiest pod rate: max(sum by (pod) (rate(rails_requests_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m])))\n  \
             container CPU per request: sum(rate(container_cpu_usage_seconds_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\",container=\"web\"}[5m])) \
             / sum(rate(rails_requests_total{namespace=\"shop\",pod=~\"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$\"}[5m]))\n"
        ),
        "{report}"
    );
}

#[test]
fn without_the_gvl_counters_the_report_uses_standard_metrics_and_says_so() {
    let t = target(None);
    let queries =
        recommend::queries(&t, &Default::default(), std::time::Duration::from_secs(300)).unwrap();
    // 180 ms wall, 76 ms of it the container's CPU.
    let m = recommend::Measurement {
        container_cpu: Some(0.076),
        wall: Some(0.180),
        busiest_pod_rate: Some(12.0),
        ..Default::default()
    };
    let (report, missing) = recommend::report(&t, &m, &queries, &settings());
    // The counters' queries returned nothing, but the figures are there: nothing missing.
    assert_eq!(missing, Vec::<&str>::new(), "{report}");
    for line in [
        "  I/O share p      57.8%       (wall − CPU) / wall, standard metrics: GVL wait counted as I/O\n",
        "  CPU per request  76ms        container CPU seconds per request, standard metrics\n",
        "  I/O per request  104ms       wall − CPU per request (I/O and GVL wait), standard metrics\n",
        "  The GVL counters had no data: figures from standard metrics",
        "Capacity per pod at 76ms CPU + 104ms I/O per request, 2 workers:\n",
    ] {
        assert!(report.contains(line), "{line:?} not in\n{report}");
    }
    assert!(report.contains(&crate::analysis::recommendation_table(
        0.104 / 0.180,
        0.05,
        0.95
    )));
    // Neither source: every query of the missing figures is named.
    let none = recommend::Measurement {
        busiest_pod_rate: Some(12.0),
        ..Default::default()
    };
    let (_, missing) = recommend::report(&t, &none, &queries, &settings());
    assert_eq!(
        missing,
        [
            "I/O share",
            "CPU per request",
            "I/O per request",
            "container CPU per request",
            "wall time per request"
        ]
    );
    // The sizing note `init` writes.
    let note = recommend::sizing_note(&m, std::time::Duration::from_secs(300)).unwrap();
    assert_eq!(
        note,
        "# Measured over the last 5m: I/O share 58% (from standard metrics: (wall − CPU) / wall, \
         GVL wait counted as I/O, so it reads high under load).\n# Amdahl: 5 threads per process \
         (speedup 1.86×); `kubectl concurrency recommend` shows the table and the capacity.\n"
    );
    assert_eq!(
        recommend::sizing_note(&none, std::time::Duration::from_secs(300)),
        None
    );
}

fn recommend_args(url: &str) -> RecommendArgs {
    RecommendArgs {
        deployment: "storefront".into(),
        prometheus: url.into(),
        container: Some("web".into()),
        window: std::time::Duration::from_secs(300),
        min_gain: 0.05,
        async_above: 0.95,
        metrics: Vec::new(),
        timeout: std::time::Duration::from_secs(5),
        access: Default::default(),
    }
}

#[tokio::test]
async fn recommend_reads_the_deployment_and_asks_prometheus() {
    let (url, queries) = canned_prometheus(vec![
        // Only the I/O share query names the GVL counter; match it first.
        ("ruby_gvl_wait_seconds_total", Some(0.52)),
        ("ruby_running_seconds_total", Some(0.076)),
        ("ruby_io_wait_seconds_total", Some(0.104)),
        ("max(sum by (pod)", None),
    ])
    .await;
    let (session, seen, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(Some("1500m")),
    )]);
    let e = recommend::run(&session, &recommend_args(&url), &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(lines(&seen), [format!("GET {DEPLOYMENTS}/storefront")]);
    assert_eq!(
        e.to_string(),
        "no data from Prometheus for busiest pod rate: see the queries above (is the exporter \
         scraped, and did the pods serve requests in the window?)"
    );
    let report = e.partial_output().unwrap();
    // Read back from container web (not the sidecar listed first): puma 2×6, 1.5 cores.
    assert!(
        report.starts_with(
            "Deployment storefront in namespace shop, container web: puma 2×6 (3/3 ready), CPU limit 1.5 cores\n"
        ),
        "{report}"
    );
    assert!(
        report.contains("puma    6        13.2 req/s  19.7 req/s  CPU limit  -         ← now\n"),
        "{report}"
    );
    let queries = queries.lock().unwrap().clone();
    // The GVL counters' four and the standard metrics' two.
    assert_eq!(queries.len(), 6, "{queries:#?}");
    assert!(
        queries
            .iter()
            .all(|q| q.contains(r#"namespace="shop",pod=~"^storefront-["#)),
        "{queries:#?}"
    );
}

#[tokio::test]
async fn recommend_for_a_missing_deployment_or_a_dead_prometheus_fails_clearly() {
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        404,
        &status(
            404,
            "NotFound",
            "deployments.apps \"storefront\" not found",
            Some("storefront"),
        ),
    )]);
    let e = recommend::run(
        &session,
        &recommend_args("http://127.0.0.1:9"),
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        r#"Deployment "storefront" not found in namespace "shop""#
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let e = recommend::run(
        &session,
        &recommend_args(&format!("http://127.0.0.1:{port}")),
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    server.abort();
    assert!(
        e.to_string().starts_with("Prometheus is unreachable: "),
        "{e}"
    );
    let mut args = recommend_args("http://127.0.0.1:9");
    args.container = Some("app".into());
    let (session, _, server) = scripted(vec![Exchange::new(
        "GET",
        &format!("{DEPLOYMENTS}/storefront"),
        200,
        &deployment_json(None),
    )]);
    let e = recommend::run(&session, &args, &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(
        e.to_string(),
        "spec.container: container \"app\" not found in Deployment storefront (containers: sidecar, web)"
    );
}

#[test]
fn metric_flags_use_the_spec_field_names() {
    let names = metric_names(&["requestsTotal=http_requests_total".into()]).unwrap();
    assert_eq!(names.requests_total, "http_requests_total");
    assert_eq!(
        names.running_seconds,
        MetricNames::default().running_seconds
    );
    let names = metric_names(&["preset=prometheusExporter".into()]).unwrap();
    assert_eq!(names.requests_total, "ruby_http_requests_total");
    let e = metric_names(&["preset=datadog".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant") && e.contains("yabeda"), "{e}");
    let e = metric_names(&["requests=x".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field \"requests\""), "{e}");
    assert!(e.contains("requestsTotal"), "{e}");
    let e = metric_names(&["requestsTotal".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected FIELD=NAME"), "{e}");
    let e = metric_names(&["runningSeconds=up{x=\"y\"}".into()])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--metric: runningSeconds"), "{e}");
}
