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

/// `schema` as the apiserver types it: `x-kubernetes-int-or-string: true` means an integer or
/// a string (the generated `anyOf` branches are left empty in a structural schema), so a
/// bare `0.05` is refused there as it is by the apiserver.
fn as_the_apiserver_types_it(schema: &mut Value) {
    if let Value::Object(map) = schema {
        if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            map.insert(
                "anyOf".into(),
                serde_json::json!([{"type": "integer"}, {"type": "string"}]),
            );
        }
        map.values_mut().for_each(as_the_apiserver_types_it);
    } else if let Value::Array(items) = schema {
        items.iter_mut().for_each(as_the_apiserver_types_it);
    }
}

/// Every reason the apiserver would give for refusing `object`, each starting with the field.
fn refusals(object: &Value) -> Vec<String> {
    let schema = openapi_schema();
    let mut typed = schema.clone();
    as_the_apiserver_types_it(&mut typed);
    let validator = jsonschema::validator_for(&typed).unwrap();
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
            typed.spec.analysis.metrics.resolve().queue_time,
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

/// Accepted here; refused ones are in e2e/manifests/invalid/ (unknown-preset,
/// puma-checks-for-falcon).
#[test]
fn presets_and_the_puma_checks_are_in_the_schema() {
    for (preset, metric) in [
        ("yabeda", "backlog"),
        ("prometheusExporter", "threadUtilization"),
    ] {
        let object = serde_json::json!({"apiVersion": "concurrency.dev/v1alpha1",
            "kind": "ConcurrencyExperiment", "metadata": {"name": "x"},
            "spec": {"targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {"prometheus": {"url": "http://p:9090"}, "metrics": {"preset": preset},
                         "checks": [{"metric": metric, "max": 3}]}}});
        assert_eq!(refusals(&object), Vec::<String>::new(), "{preset}");
    }
}

/// What the apiserver would say about updating `old` to `new`: the schema on `new`, then the
/// CEL rules with `oldSelf` bound to `old` (transition rules run on updates only).
fn update_refusals(old: &Value, new: &Value) -> Vec<String> {
    let schema = openapi_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut errors: Vec<String> = validator
        .iter_errors(new)
        .map(|e| format!("{}: {e}", field_path(e.instance_path().as_str())))
        .collect();
    if errors.is_empty() {
        if let Err(cel) = kube::core::cel::Validator::new().validate(&schema, new, Some(old)) {
            errors.extend(
                cel.into_vec()
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field_path, e.message)),
            );
        }
    }
    errors
}

fn stored_experiment() -> Value {
    serde_json::json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "x"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "container": "web",
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "traffic": {"router": "gatewayAPI", "httpRoute": "storefront"},
            "analysis": {"prometheus": {"url": "http://p:9090"}, "checks": [{"metric": "latency", "max": "500ms"}]}
        }
    })
}

#[test]
fn target_container_and_traffic_are_immutable() {
    let old = stored_experiment();
    assert!(refusals(&old).is_empty(), "{:?}", refusals(&old));
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut new = old.clone();
        f(&mut new);
        update_refusals(&old, &new)
    };
    type Change = fn(&mut Value);
    let cases: Vec<(&str, Change)> = vec![
        ("spec.targetRef", |v| {
            v["spec"]["targetRef"]["name"] = "checkout".into()
        }),
        ("spec.container", |v| v["spec"]["container"] = "app".into()),
        ("spec.container", |v| {
            v["spec"].as_object_mut().unwrap().remove("container");
        }),
        ("spec.traffic", |v| {
            v["spec"]["traffic"]["httpRoute"] = "other".into()
        }),
        ("spec.traffic", |v| {
            v["spec"]["traffic"]["service"] = "storefront-web".into()
        }),
        ("spec.traffic", |v| {
            v["spec"]["traffic"] = serde_json::json!({"router": "replicas"})
        }),
    ];
    for (field, change) in cases {
        let refused = edit(&change);
        let expected = format!("{field} is immutable");
        assert!(
            refused.iter().any(|r| r.starts_with(field)
                && r.contains(&expected)
                && r.contains("delete and recreate the experiment")),
            "{field}: {refused:?}"
        );
    }
    // Adding a container to an experiment that had none is a change too.
    let mut without = old.clone();
    without["spec"].as_object_mut().unwrap().remove("container");
    let refused = update_refusals(&without, &old);
    assert!(
        refused
            .iter()
            .any(|r| r.contains("spec.container is immutable")),
        "{refused:?}"
    );

    // Everything else may change: the candidate, the stages, pausing and aborting.
    let allowed = edit(&|v| {
        v["spec"]["candidate"]["threads"] = 3.into();
        v["spec"]["paused"] = true.into();
        v["spec"]["abort"] = true.into();
        v["spec"]["stages"] = serde_json::json!([{"weight": 50}, {"weight": 100}]);
    });
    assert!(allowed.is_empty(), "{allowed:?}");
    // A status write leaves the spec as it was: no transition rule trips.
    let status = edit(&|v| {
        v["status"] =
            serde_json::json!({"phase": "Progressing", "stage": "1/3", "plannedWeight": 30});
    });
    assert!(status.is_empty(), "{status:?}");
    // On create there is no old object: the same spec is accepted.
    let mut other = old.clone();
    other["spec"]["targetRef"]["name"] = "checkout".into();
    assert!(refusals(&other).is_empty());
}

fn with_analysis(analysis: Value) -> Value {
    serde_json::json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "x"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": analysis
        }
    })
}

#[test]
fn a_zero_interval_is_refused() {
    for interval in ["0s", "0m", "0.0s", "0h0m0s", "00ms"] {
        let refused = refusals(&with_analysis(serde_json::json!(
            {"prometheus": {"url": "http://p:9090"}, "interval": interval,
             "checks": [{"metric": "latency", "max": "500ms"}]}
        )));
        assert!(
            refused
                .iter()
                .any(|r| r.starts_with("spec.analysis.interval")
                    && r.contains("longer than 0s")
                    && r.contains("two Prometheus scrape intervals")),
            "{interval}: {refused:?}"
        );
    }
    for interval in ["500ms", "0.5s", "10s", "1m0s", "1m"] {
        let object = with_analysis(serde_json::json!(
            {"prometheus": {"url": "http://p:9090"}, "interval": interval,
             "checks": [{"metric": "latency", "max": "500ms"}]}
        ));
        assert!(
            refusals(&object).is_empty(),
            "{interval}: {:?}",
            refusals(&object)
        );
    }
}

#[test]
fn min_samples_cannot_exceed_the_samples_kept() {
    let with = |min: i64| {
        refusals(&with_analysis(serde_json::json!(
            {"prometheus": {"url": "http://p:9090"}, "statistical": {"minSamples": min},
             "checks": [{"metric": "latency", "maxIncrease": "10%"}]}
        )))
    };
    assert!(with(11).is_empty(), "{:?}", with(11));
    assert!(with(3).is_empty());
    let refused = with(12);
    assert!(
        refused
            .iter()
            .any(|r| r.starts_with("spec.analysis.statistical.minSamples")
                && r.contains("at most 11")),
        "{refused:?}"
    );
    assert_eq!(
        concurrency_operator::api::MAX_MIN_SAMPLES as usize,
        concurrency_operator::plan::KEPT_ANALYSES + 1
    );
}

/// The example experiment choosing among `candidates` instead of its one candidate.
fn selecting(candidates: serde_json::Value) -> serde_json::Value {
    let (mut object, _) = load(&root().join("examples/puma-threads.yaml"));
    let spec = object["spec"].as_object_mut().unwrap();
    spec.remove("candidate");
    spec.insert("candidates".into(), candidates);
    object
}

#[test]
fn a_selection_spec_is_accepted_and_reads_back() {
    let mut object = selecting(serde_json::json!([
        {"server": "puma", "workers": 2, "threads": 3},
        {"server": "puma", "workers": 2, "threads": 4},
        {"server": "falcon", "workers": 2},
        {"server": "puma", "workers": 1, "threads": 1},
        {"server": "puma", "workers": 2, "threads": 5}
    ]));
    let spec = object["spec"].as_object_mut().unwrap();
    // 5 × 10 % = 50 %: the most untried configs may get together (the default weight).
    spec.insert(
        "selection".into(),
        serde_json::json!({"duration": "20m", "objective": {"minimize": "memory"}, "tolerance": "5%", "requireSignal": true}),
    );
    spec.insert("baseline".into(), serde_json::json!({"fresh": true}));
    // Puma's own stats cannot judge the falcon candidate: the example's Puma checks go.
    let checks = spec["analysis"]["checks"].as_array_mut().unwrap();
    checks.retain(|c| !matches!(c["metric"].as_str(), Some("backlog" | "threadUtilization")));
    let refused = refusals(&object);
    assert!(refused.is_empty(), "{refused:#?}");
    let typed: ConcurrencyExperiment = serde_json::from_value(object).unwrap();
    assert!(typed.spec.selects() && typed.spec.fresh_baseline());
    assert_eq!(typed.spec.candidate_list().len(), 5);
    assert_eq!(typed.spec.selection_or_default().weight, 10);
    assert_eq!(
        typed.spec.selection_winner(Some(2)).unwrap().summary(),
        "falcon 2 workers"
    );
    assert_eq!(typed.spec.selection_winner(Some(7)), None);
}

#[test]
fn puma_stats_checks_refuse_a_falcon_among_the_candidates() {
    let mut object = selecting(serde_json::json!([
        {"server": "puma", "workers": 2, "threads": 3},
        {"server": "falcon", "workers": 2}
    ]));
    object["spec"]["analysis"]["checks"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"metric": "backlog", "max": 2}));
    let refused = refusals(&object);
    assert!(
        refused
            .iter()
            .any(|r| r.starts_with("spec.analysis.checks: ")
                && r.contains("which a falcon candidate does not have")),
        "{refused:#?}"
    );
}
