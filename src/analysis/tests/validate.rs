use super::fixtures::analysis;
use crate::analysis::validate;

#[test]
fn validate_accepts_the_design_example() {
    let mut a = analysis(
        r#"
- {metric: latency, quantile: 0.99, maxIncrease: "10%", max: 500ms}
- {metric: memory, maxIncrease: "20%"}
- {metric: gvlWait, max: "15%"}
- {metric: errorRate, max: "1%"}
- {name: backlog, query: 'max(puma_backlog{pod=~"{{pods}}"})', max: 5}
- {metric: queueTime, quantile: 0.9, max: 50ms}
- {name: busy, query: 'avg(rate(container_cpu_usage_seconds_total{namespace="{{ namespace }}",pod=~"{{pods}}",container="{{container}}"}[{{interval}}] offset 1m @ end())) / 2', max: "90%"}"#,
    );
    assert_eq!(validate(&a), Ok(()));
    // Every way `{{interval}}` renders is a PromQL duration.
    for interval in ["500ms", "90s", "1.5m", "1h0m30s"] {
        a.interval = interval.into();
        assert_eq!(validate(&a), Ok(()), "{interval}");
    }
}

#[test]
fn the_examples_analyses_validate() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let exp: crate::api::ConcurrencyExperiment = serde_yaml::from_str(&text).unwrap();
            assert_eq!(validate(&exp.spec.analysis), Ok(()), "{}", path.display());
            n += 1;
        }
    }
    assert!(n >= 2, "examples found: {n}");
}

#[test]
fn validate_refuses_a_query_that_is_not_promql_naming_the_check() {
    let a = analysis(
        r#"
- {metric: latency, max: 500ms}
- {name: backlog, query: 'max(puma_backlog{pod=~"{{pods}}"}', max: 5}"#,
    );
    let e = validate(&a).unwrap_err();
    assert_eq!(e.category(), "InvalidPromQL");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "spec.analysis.checks[1].query: check backlog: not valid PromQL once the template \
             variables are filled in: "
        ),
        "{text}"
    );
    assert!(!text.contains('\n'), "one line: {text}");
    // A regex Prometheus could not compile is caught as well.
    let a = analysis(r#"[{name: odd, query: 'max(up{job=~"(unclosed"})', max: 5}]"#);
    assert_eq!(validate(&a).unwrap_err().category(), "InvalidPromQL");
    // A range over a placeholder that is not a duration: `{{namespace}}` where `{{interval}}`
    // was meant.
    let a = analysis(r#"[{name: wrong, query: 'sum(rate(x[{{namespace}}]))', max: 5}]"#);
    assert_eq!(validate(&a).unwrap_err().category(), "InvalidPromQL");
}

#[test]
fn validate_refuses_an_unknown_template_variable_naming_the_check() {
    let a = analysis(
        r#"
- {metric: latency, max: 500ms}
- {name: backlog, query: 'max(puma_backlog{pod=~"{{pod}}"})', max: 5}"#,
    );
    assert_eq!(
        validate(&a).unwrap_err().to_string(),
        "spec.analysis.checks[1].query: check backlog: unknown template variable {{pod}} \
         (known: namespace, pods, interval, container, window)"
    );
}

#[test]
fn validate_refuses_more_min_samples_than_are_kept() {
    let mut a = analysis(r#"[{metric: latency, maxIncrease: "10%"}]"#);
    a.statistical = Some(crate::api::Statistical {
        alpha: 0.05,
        min_samples: 11,
    });
    assert_eq!(validate(&a), Ok(()));
    a.statistical = Some(crate::api::Statistical {
        alpha: 0.05,
        min_samples: 12,
    });
    assert_eq!(
        validate(&a).unwrap_err().to_string(),
        "spec.analysis.statistical.minSamples: 12 is more than the 11 samples there can be (the \
         last 10 analyses kept in status and the current one), so the test would never run"
    );
}

#[test]
fn validate_names_what_is_wrong() {
    let a = analysis(r#"[{name: backlog, query: 'max(puma_backlog{pod=~"{{pod}}"})', max: 5}]"#);
    let e = validate(&a).unwrap_err();
    assert_eq!(e.category(), "UnknownTemplateVariable");
    assert!(e.to_string().contains("check backlog"), "{e}");

    let a = analysis(r#"[{metric: latency, max: "fast"}]"#);
    let e = validate(&a).unwrap_err();
    assert_eq!(e.category(), "InvalidQuantity");
    assert!(e.to_string().contains("checks[latency].max"), "{e}");

    let mut a = analysis("[{metric: errorRate, max: 1%}]");
    a.metrics.status_label = Some("code\"".into());
    assert_eq!(validate(&a).unwrap_err().category(), "BadMetricName");

    let mut a = analysis("[{metric: errorRate, max: 1%}]");
    a.interval = "soon".into();
    let e = validate(&a).unwrap_err();
    assert!(e.to_string().starts_with("spec.analysis.interval"), "{e}");

    let mut a = analysis("[{metric: errorRate, max: 1%}]");
    a.recommendation.min_gain = "5".into();
    assert!(validate(&a).is_err());
}

#[test]
fn validate_refuses_a_check_named_like_the_restart_rule() {
    let a = analysis(
        r#"
- {name: restarts, query: 'sum(kube_pod_container_status_restarts_total{pod=~"{{pods}}"})', max: 0}"#,
    );
    let e = validate(&a).unwrap_err();
    assert_eq!(e.category(), "ReservedCheckName");
    assert!(
        e.to_string()
            .starts_with("spec.analysis.checks[0].name: \"restarts\""),
        "{e}"
    );
}
