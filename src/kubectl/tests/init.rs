use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::analysis::Finding;
use crate::api::ConcurrencyExperiment;
use crate::kubectl::cli::{InitArgs, InitServer};
use crate::kubectl::init;

/// What the API server would do with the manifest: the CRD's schema and CEL rules, then the
/// operator's own validation of what the schema cannot express.
pub(super) fn assert_valid(yaml: &str) -> ConcurrencyExperiment {
    use kube::CustomResourceExt;
    let object: Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(yaml).unwrap()).unwrap();
    let crd = serde_json::to_value(ConcurrencyExperiment::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&object)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{yaml}");
    kube::core::cel::Validator::new()
        .validate(schema, &object, None)
        .unwrap_or_else(|e| panic!("CEL: {:?}\n{yaml}", e.into_vec()));
    let exp: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
    crate::plan::validate(&exp.spec, None).unwrap();
    crate::analysis::validate(&exp.spec.analysis).unwrap();
    exp
}

pub(super) fn init_args(
    server: InitServer,
    threads: Option<i32>,
    workers: Option<i32>,
) -> InitArgs {
    InitArgs {
        deployment: "storefront".into(),
        server,
        threads,
        workers,
        prometheus: None,
        container: None,
        name: None,
        preset: None,
        access: Default::default(),
    }
}

pub(super) fn puma_2x6() -> crate::api::RenderedServer {
    crate::api::RenderedServer {
        server: crate::api::ServerKind::Puma,
        workers: Some(2),
        threads: Some(6),
        ..Default::default()
    }
}

pub(super) fn starting(
    candidate: crate::api::ServerConfig,
    data: Option<Vec<Finding>>,
) -> init::Starting {
    init::Starting {
        name: init::default_name("storefront", &candidate),
        namespace: "shop".into(),
        deployment: "storefront".into(),
        container: "web".into(),
        baseline: puma_2x6(),
        candidate,
        prometheus: data
            .as_ref()
            .map(|_| "http://prometheus.monitoring:9090".to_string()),
        preset: None,
        data,
        gate_off: None,
        sizing: None,
        reach: Vec::new(),
    }
}

#[test]
fn init_writes_a_valid_starter_with_the_current_config_as_a_comment() {
    let candidate =
        init::candidate(&init_args(InitServer::Puma, Some(4), None), &puma_2x6()).unwrap();
    let yaml = init::manifest(&starting(candidate, None));
    assert_eq!(
        yaml,
        r#"# Starter ConcurrencyExperiment for Deployment storefront in namespace shop.
# The target runs now (read back from container web): puma 2×6
# Candidate: puma 2×4. Review stages and checks, then: kubectl apply -f FILE
apiVersion: concurrency.dev/v1alpha1
kind: ConcurrencyExperiment
metadata:
  name: "storefront-puma-2x4"
  namespace: "shop"
spec:
  targetRef:
    name: "storefront"
  container: "web"
  candidate:
    server: puma
    workers: 2
    threads: 4
  traffic:
    router: replicas   # candidate pods join the target's Service; or gatewayAPI + httpRoute
  stages:
    - {weight: 30, duration: 10m}
    - {weight: 70, duration: 10m}
    - {weight: 100, duration: 10m}
  analysis:
    prometheus:
      url: "http://prometheus.monitoring:9090"   # placeholder: your Prometheus (or pass --prometheus)
    interval: 1m
    judge: sequential   # latency, queueTime, errorRate: anytime-valid tests on all of the stage's requests (docs/judge.md)
    failureLimit: 1
    inconclusiveLimit: 3
    minRequests: 50
    checks:
      # p99 request duration at most 10% above the baseline's, over the stage's requests so far
      - {metric: latency, quantile: 0.99, maxIncrease: "10%"}
      # working set per pod at most 20% above the baseline's (memory grows with workers and threads)
      - {metric: memory, maxIncrease: "20%"}
      # share of 5xx responses
      - {metric: errorRate, max: "1%"}
      # share of request time spent waiting for the GVL: too many threads per process
      # - {metric: gvlWait, max: "15%"}   # needs the GVL counters of this repository's concurrency-metrics gem (no published gem writes them); pass --prometheus to check
      # requests waiting for a free Puma thread (Puma's own stats, no header needed)
      # - {metric: backlog, max: 5}   # needs yabeda-puma-plugin or prometheus_exporter's Puma collector; pass --prometheus to check
      # time requests wait for a free thread; needs X-Request-Start from the load balancer
      # - {metric: queueTime, quantile: 0.9, max: 50ms, maxIncrease: "50%"}   # enable once your load balancer sets X-Request-Start (pass --prometheus to check)
  promotion: auto   # or manual: hold at the last stage until `kubectl concurrency approve`
"#
    );
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    // What a yabeda-rails app on Kubernetes has; never gvlWait without a lookup.
    assert_eq!(names, ["latency", "memory", "errorRate"]);
    assert_eq!(exp.spec.single_candidate().summary(), "puma 2×4");
    assert_eq!(exp.metadata.name.as_deref(), Some("storefront-puma-2x4"));
}

#[test]
fn init_for_falcon_has_no_thread_checks_and_probed_checks_follow_the_data() {
    let args = init_args(InitServer::Falcon, None, Some(3));
    let candidate = init::candidate(&args, &puma_2x6()).unwrap();
    // Probed: latency, memory, errorRate, queueTime (no gvlWait for Falcon); memory had no data.
    let gone = Finding::Missing("check memory: gone".into());
    let found = vec![Finding::Found, gone, Finding::Found, Finding::Found];
    let yaml = init::manifest(&starting(candidate, Some(found)));
    let exp = assert_valid(&yaml);
    let names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    assert_eq!(names, ["latency", "errorRate", "queueTime"]);
    assert_eq!(exp.metadata.name.as_deref(), Some("storefront-falcon-3"));
    assert!(
        yaml.contains("    server: falcon\n    workers: 3\n    # falcon: {mode: host}"),
        "{yaml}"
    );
    assert!(
        yaml.contains(r#"      # - {metric: memory, maxIncrease: "20%"}   # its series were not found for the target's pods (see stderr)"#),
        "{yaml}"
    );
    assert!(!yaml.contains("placeholder"), "{yaml}");
    // Nothing had data: the unprobed defaults stay on, with a warning.
    let candidate = init::candidate(&args, &puma_2x6()).unwrap();
    let unknown = Finding::Unknown("check x: not scraped yet".into());
    let yaml = init::manifest(&starting(candidate, Some(vec![unknown; 4])));
    assert!(
        yaml.contains("# WARNING: no check's series were found"),
        "{yaml}"
    );
    let exp = assert_valid(&yaml);
    assert_eq!(exp.spec.analysis.checks.len(), 3);
}

#[test]
fn init_refuses_what_would_not_be_an_experiment() {
    let same = init::candidate(&init_args(InitServer::Puma, Some(6), None), &puma_2x6());
    assert_eq!(
        same.unwrap_err().to_string(),
        "the target already runs puma 2×6: choose another config"
    );
    let e = init::candidate(&init_args(InitServer::Puma, None, Some(2)), &puma_2x6()).unwrap_err();
    assert_eq!(e.to_string(), "--threads N is needed for a puma candidate");
    let e = init::candidate(
        &init_args(InitServer::Falcon, Some(4), Some(2)),
        &puma_2x6(),
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("--threads is for puma only"),
        "{e}"
    );
    // A new worker count, same threads, is a different config.
    let c = init::candidate(&init_args(InitServer::Puma, Some(6), Some(3)), &puma_2x6()).unwrap();
    assert_eq!(c.summary(), "puma 3×6");
    assert_eq!(init::default_name(&"x".repeat(260), &c).len(), 253);
}

#[test]
fn init_writes_the_preset_it_was_given() {
    let candidate =
        init::candidate(&init_args(InitServer::Puma, Some(4), None), &puma_2x6()).unwrap();
    let mut s = starting(candidate, None);
    s.preset = Some(crate::api::MetricPreset::PrometheusExporter);
    let yaml = init::manifest(&s);
    assert!(
        yaml.contains(
            "    minRequests: 50\n    metrics: {preset: prometheusExporter}\n    checks:\n"
        ),
        "{yaml}"
    );
    let exp = assert_valid(&yaml);
    assert_eq!(
        exp.spec.analysis.metrics.resolve().requests_total,
        "ruby_http_requests_total"
    );
}

#[test]
fn init_warns_above_the_stages_when_the_measured_rate_cannot_feed_the_checks_it_writes() {
    let candidate =
        init::candidate(&init_args(InitServer::Puma, Some(4), None), &puma_2x6()).unwrap();
    let starters = init::starters(&candidate);
    let analysis =
        init::starter_analysis("http://prometheus.monitoring:9090", None, &starters).unwrap();
    let found = vec![Finding::Found; starters.len()];
    // 1 request/s: stage 1 (30%) brings 18 per variant per minute, 180 per stage.
    let notes = init::reach_notes(&analysis, &found, Some(1.0));
    assert_eq!(notes.len(), 3, "{notes:#?}");
    assert!(
        notes[0]
            .contains("about 18 requests per variant per 1m interval, fewer than minRequests 50"),
        "{}",
        notes[0]
    );
    // The starter judges sequentially: p99 needs ~1,000 per variant in a stage, which none of
    // the three brings; queueTime's p90 ~180, which stage 3 brings.
    assert!(
        notes[1].starts_with("Check latency: its p99 shows nothing before")
            && notes[1].contains("stage 1 (30%: ~180), stage 2 (70%: ~180), stage 3 (100%: ~600)"),
        "{}",
        notes[1]
    );
    assert!(
        notes[2].starts_with("Check queueTime: its p90 shows nothing before")
            && !notes[2].contains("stage 3"),
        "{}",
        notes[2]
    );
    // A check not written (its series missing) is not warned about.
    let mut data = found.clone();
    data[0] = Finding::Missing("no series".into());
    let notes = init::reach_notes(&analysis, &data, Some(1.0));
    assert!(!notes.iter().any(|n| n.contains("latency")), "{notes:#?}");
    // 100 requests/s feed every check; no rate measured, nothing said.
    assert!(init::reach_notes(&analysis, &found, Some(100.0)).is_empty());
    assert!(init::reach_notes(&analysis, &found, None).is_empty());
    // Written as comments above the stages; the manifest stays valid.
    let mut s = starting(candidate, Some(found.clone()));
    s.reach = init::reach_notes(&analysis, &found, Some(1.0));
    let yaml = init::manifest(&s);
    assert!(
        yaml.contains("  # WARNING: At the target's 1 req/s, stage 1 (30%) brings about 18"),
        "{yaml}"
    );
    assert!(yaml.find("# WARNING").unwrap() < yaml.find("  stages:").unwrap());
    assert_valid(&yaml);
}
