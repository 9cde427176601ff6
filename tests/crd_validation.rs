//! The CRD refuses bad manifests with a message naming the field, the committed CRD YAML is
//! current, and the examples are valid.
//!
//! The apiserver checks a custom resource in two passes: the OpenAPI schema (types, enums,
//! patterns, ranges) and then the CEL `x-kubernetes-validations` rules, after defaulting.
//! Both are reproduced here: the schema with the `jsonschema` crate, CEL with kube's
//! client-side evaluator. The end-to-end suite applies the same manifests to a real
//! apiserver.

use std::path::{Path, PathBuf};

use concurrency_operator::api::{crd_yaml, ConcurrencyExperiment};
use kube::CustomResourceExt;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn openapi_schema() -> Value {
    let crd = serde_json::to_value(ConcurrencyExperiment::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// `/spec/stages/0/weight` → `spec.stages[0].weight`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').filter(|p| !p.is_empty()) {
        if part.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

/// Every reason the apiserver would give for refusing `object`, each starting with the field.
fn refusals(object: &Value) -> Vec<String> {
    let schema = openapi_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut errors: Vec<String> = validator
        .iter_errors(object)
        .map(|e| {
            let mut field = field_path(e.instance_path().as_str());
            // The apiserver names the missing field itself (`spec.candidate: Required value`).
            if let jsonschema::error::ValidationErrorKind::Required { property } = e.kind() {
                field = format!("{field}.{}", property.as_str().unwrap_or_default());
            }
            format!("{field}: {e}")
        })
        .collect();
    if errors.is_empty() {
        if let Err(cel) = kube::core::cel::Validator::new().validate(&schema, object, None) {
            errors.extend(
                cel.into_vec()
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field_path, e.message)),
            );
        }
    }
    errors
}

fn load(path: &Path) -> (Value, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let expect = text
        .lines()
        .find_map(|l| l.strip_prefix("# expect: "))
        .unwrap_or_default()
        .trim()
        .to_string();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    (serde_json::to_value(yaml).unwrap(), expect)
}

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn committed_crd_is_current() {
    let committed =
        std::fs::read_to_string(root().join("crds/concurrencyexperiments.concurrency.dev.yaml"))
            .unwrap();
    assert!(
        committed == crd_yaml().unwrap(),
        "crds/ is stale: run `cargo run -q -- crd > crds/concurrencyexperiments.concurrency.dev.yaml`"
    );
}

#[test]
fn helm_chart_ships_the_same_crd() {
    let chart = std::fs::read_to_string(
        root().join("charts/concurrency-operator/crds/concurrencyexperiments.concurrency.dev.yaml"),
    )
    .unwrap();
    assert!(
        chart == crd_yaml().unwrap(),
        "the chart's CRD drifted: copy crds/concurrencyexperiments.concurrency.dev.yaml into charts/concurrency-operator/crds/"
    );
}

#[test]
fn examples_are_accepted_and_parse() {
    let examples = yaml_files("examples");
    assert!(examples.len() >= 2);
    for path in examples {
        let (object, _) = load(&path);
        let refused = refusals(&object);
        assert!(refused.is_empty(), "{}: {refused:#?}", path.display());
        let typed: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
        assert!(!typed.spec.analysis.checks.is_empty());
    }
}

#[test]
fn invalid_manifests_are_refused_naming_the_field() {
    let manifests = yaml_files("e2e/manifests/invalid");
    assert!(manifests.len() >= 8, "at least 8 kinds of mistake");
    let mut failures = Vec::new();
    for path in &manifests {
        let (object, expect) = load(path);
        assert!(
            !expect.is_empty(),
            "{} lacks '# expect: <field>'",
            path.display()
        );
        let refused = refusals(&object);
        if !refused.iter().any(|r| r.starts_with(&expect)) {
            failures.push(format!(
                "{}: expected a refusal naming {expect}, got {refused:?}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn defaults_fill_in_the_stage_plan() {
    let object = serde_json::json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "x"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {"prometheus": {"url": "http://p:9090"}, "checks": [{"metric": "latency", "max": "500ms"}]}
        }
    });
    assert!(refusals(&object).is_empty());
    let typed: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
    let weights: Vec<i32> = typed.spec.stages.iter().map(|s| s.weight).collect();
    assert_eq!(weights, vec![30, 70, 100]);
    assert_eq!(typed.spec.analysis.interval, "1m");
    assert_eq!(typed.spec.analysis.min_requests, 50);
}

#[test]
fn quantile_is_accepted_for_latency_and_queue_time_only() {
    let with_check = |check: Value| {
        serde_json::json!({
            "apiVersion": "concurrency.dev/v1alpha1",
            "kind": "ConcurrencyExperiment",
            "metadata": {"name": "x"},
            "spec": {
                "targetRef": {"name": "storefront"},
                "candidate": {"server": "puma", "workers": 2, "threads": 4},
                "analysis": {"prometheus": {"url": "http://p:9090"}, "checks": [check]}
            }
        })
    };
    for metric in ["latency", "queueTime"] {
        let object = with_check(serde_json::json!(
            {"metric": metric, "quantile": 0.9, "max": "50ms", "maxIncrease": "50%"}
        ));
        assert!(
            refusals(&object).is_empty(),
            "{metric}: {:?}",
            refusals(&object)
        );
        let typed: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
        assert_eq!(typed.spec.analysis.checks[0].display_name(), metric);
        assert_eq!(
            typed.spec.analysis.metrics.queue_time,
            "rails_request_queue_time_seconds"
        );
    }
    let refused = refusals(&with_check(serde_json::json!(
        {"metric": "gvlWait", "quantile": 0.9, "max": "5%"}
    )));
    assert!(
        refused
            .iter()
            .any(|r| r.starts_with("spec.analysis.checks[0].quantile")
                && r.contains("latency or queueTime")),
        "{refused:?}"
    );
}
