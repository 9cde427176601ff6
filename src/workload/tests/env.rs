//! Server variables from `envFrom`, `configMapKeyRef` and Secrets: read back as the kubelet
//! resolves them, and overridden by literal entries in the candidate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapEnvSource, ConfigMapKeySelector, Container, EnvFromSource, EnvVar, EnvVarSource,
    SecretEnvSource, SecretKeySelector,
};
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::api::RenderedServer;
use crate::workload::env::*;
use crate::workload::{read_baseline, render_server, SERVER_VARS};

fn from_config_map(name: &str, prefix: Option<&str>, optional: bool) -> EnvFromSource {
    EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource {
            name: name.into(),
            optional: optional.then_some(true),
        }),
        prefix: prefix.map(String::from),
        secret_ref: None,
    }
}

fn from_secret(name: &str) -> EnvFromSource {
    EnvFromSource {
        secret_ref: Some(SecretEnvSource {
            name: name.into(),
            optional: None,
        }),
        config_map_ref: None,
        prefix: None,
    }
}

fn key_ref(var: &str, config_map: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: var.into(),
        value: None,
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: config_map.into(),
                key: key.into(),
                optional: optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn secret_ref(var: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: var.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn maps(list: &[(&str, &[(&str, &str)])]) -> ConfigMaps {
    list.iter()
        .map(|(name, data)| {
            let data: BTreeMap<String, String> = data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (name.to_string(), data)
        })
        .collect()
}

fn baseline(c: Container, config_maps: &ConfigMaps) -> RenderedServer {
    read_baseline(&deployment("storefront", vec![c]), None, config_maps).unwrap()
}

fn counts(b: &RenderedServer) -> (Option<i32>, Option<i32>, Option<i32>) {
    (b.workers, b.threads, b.min_threads)
}

#[test]
fn env_from_config_maps_is_read_in_kubelet_order() {
    let mut c = container("app", &[]);
    c.env_from = Some(vec![
        from_config_map("puma-defaults", None, false),
        from_config_map("puma", Some("APP_"), false),
        from_config_map("puma-tuning", None, false),
    ]);
    let data = maps(&[
        (
            "puma-defaults",
            &[
                ("WEB_CONCURRENCY", "1"),
                ("RAILS_MAX_THREADS", "5"),
                ("PUMA_MIN_THREADS", "1"),
            ],
        ),
        // With the prefix, only APP_… names reach the container: nothing here matters.
        ("puma", &[("WEB_CONCURRENCY", "9")]),
        (
            "puma-tuning",
            &[("WEB_CONCURRENCY", "2"), ("RAILS_MAX_THREADS", "6")],
        ),
    ]);
    let b = baseline(c.clone(), &data);
    assert_eq!(counts(&b), (Some(2), Some(6), Some(1)));
    assert!(b.unresolved.is_empty(), "{:?}", b.unresolved);

    // Explicit env beats every envFrom source, and the last duplicate wins.
    c.env = Some(env(&[
        ("WEB_CONCURRENCY", "3"),
        ("RAILS_MAX_THREADS", "7"),
        ("RAILS_MAX_THREADS", "8"),
    ]));
    assert_eq!(counts(&baseline(c, &data)), (Some(3), Some(8), Some(1)));
}

#[test]
fn prefixed_env_from_is_matched_by_the_prefixed_name() {
    let mut c = container("app", &[]);
    c.env_from = Some(vec![from_config_map("puma", Some("PUMA_"), false)]);
    let data = maps(&[("puma", &[("MAX_THREADS", "6"), ("MIN_THREADS", "2")])]);
    assert_eq!(counts(&baseline(c, &data)), (None, Some(6), Some(2)));
}

#[test]
fn config_map_key_refs_are_resolved() {
    let mut c = container("app", &[]);
    c.env = Some(vec![
        key_ref("WEB_CONCURRENCY", "puma", "workers", false),
        key_ref("RAILS_MAX_THREADS", "puma", "threads", false),
        key_ref("PUMA_MIN_THREADS", "gone", "min", true),
    ]);
    let data = maps(&[("puma", &[("workers", "2"), ("threads", "6")])]);
    let b = baseline(c.clone(), &data);
    assert_eq!(counts(&b), (Some(2), Some(6), None));
    assert!(
        b.unresolved.is_empty(),
        "optional and missing sets nothing: {:?}",
        b.unresolved
    );

    // A required ConfigMap or key that is missing leaves the value unknown, and says why.
    let b = baseline(c.clone(), &maps(&[("puma", &[("threads", "6")])]));
    assert_eq!(counts(&b), (None, Some(6), None));
    assert_eq!(
        b.unresolved,
        ["WEB_CONCURRENCY: unknown (ConfigMap puma has no key workers)"]
    );
    let b = baseline(c, &ConfigMaps::new());
    assert_eq!(
        b.unresolved,
        [
            "WEB_CONCURRENCY: unknown (ConfigMap puma not found or not readable)",
            "RAILS_MAX_THREADS: unknown (ConfigMap puma not found or not readable)",
        ]
    );
}

#[test]
fn secrets_are_never_read_and_say_so() {
    let mut c = container("app", &[("RAILS_MAX_THREADS", "6")]);
    c.env
        .as_mut()
        .unwrap()
        .push(secret_ref("WEB_CONCURRENCY", "app-env", "workers"));
    let b = baseline(c, &ConfigMaps::new());
    assert_eq!(counts(&b), (None, Some(6), None));
    assert_eq!(
        b.unresolved,
        ["WEB_CONCURRENCY: unknown (from Secret app-env key workers)"]
    );
    assert_eq!(b.summary(), "puma ?×6");

    // A Secret through envFrom decides only what nothing else sets.
    let mut c = container("app", &[]);
    c.env_from = Some(vec![
        from_config_map("puma", None, false),
        from_secret("rails"),
    ]);
    let data = maps(&[("puma", &[("WEB_CONCURRENCY", "2")])]);
    let b = baseline(c, &data);
    assert_eq!(counts(&b), (Some(2), None, None));
    // Minimum threads default to the maximum: a Secret that might hold them is not worth a
    // note.
    assert_eq!(
        b.unresolved,
        ["RAILS_MAX_THREADS: unknown (from Secret rails, if it sets it)"]
    );

    // Flags override the env, so what a Secret might hold does not matter then.
    let mut c = container("app", &[]);
    c.env_from = Some(vec![from_secret("rails")]);
    c.command = Some(["puma", "-w", "2", "-t", "6:6"].map(String::from).to_vec());
    let b = baseline(c, &ConfigMaps::new());
    assert_eq!(counts(&b), (Some(2), Some(6), None));
    assert!(b.unresolved.is_empty(), "{:?}", b.unresolved);
}

#[test]
fn only_config_maps_that_can_decide_a_server_variable_are_referenced() {
    let mut c = container("app", &[]);
    c.env_from = Some(vec![
        from_config_map("app-config", None, true),
        from_secret("rails"),
    ]);
    c.env = Some(vec![
        key_ref("WEB_CONCURRENCY", "puma", "workers", false),
        key_ref("DATABASE_HOST", "db", "host", false),
    ]);
    let names: Vec<String> = referenced_config_maps(&c, &SERVER_VARS)
        .into_iter()
        .collect();
    assert_eq!(names, ["app-config", "puma"]);
}

#[test]
fn the_candidate_sets_literals_over_value_from_and_env_from() {
    let mut c = container("app", &[("RAILS_ENV", "production")]);
    c.env_from = Some(vec![from_config_map("puma", None, false)]);
    c.env.as_mut().unwrap().extend([
        key_ref("WEB_CONCURRENCY", "puma", "workers", false),
        secret_ref("RAILS_MAX_THREADS", "app-env", "threads"),
    ]);
    render_server(&mut c, &puma(3, 4)).unwrap();
    assert_eq!(
        env_pairs(&c),
        pairs(&[
            ("RAILS_ENV", "production"),
            ("WEB_CONCURRENCY", "3"),
            ("RAILS_MAX_THREADS", "4"),
            ("PUMA_MAX_THREADS", "4"),
            ("PUMA_MIN_THREADS", "4"),
        ])
    );
    assert!(
        c.env.iter().flatten().all(|v| v.value_from.is_none()),
        "valueFrom replaced, not duplicated"
    );
    assert_eq!(
        c.env_from.as_ref().map(Vec::len),
        Some(1),
        "envFrom kept; env overrides it"
    );
    // Read back with the ConfigMap still saying 2×6: the literal entries win.
    let data = maps(&[(
        "puma",
        &[("WEB_CONCURRENCY", "2"), ("RAILS_MAX_THREADS", "6")],
    )]);
    assert_eq!(counts(&baseline(c, &data)), (Some(3), Some(4), None));
}

#[test]
fn resolve_env_reports_unknown_sources() {
    let mut c = container("app", &[]);
    c.env = Some(vec![EnvVar {
        name: "WEB_CONCURRENCY".into(),
        value: None,
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(k8s_openapi::api::core::v1::ResourceFieldSelector {
                resource: "limits.cpu".into(),
                ..Default::default()
            }),
            ..EnvVarSource::default()
        }),
    }]);
    let env = resolve_env(&c, &SERVER_VARS, &ConfigMaps::new());
    assert_eq!(
        env.get("WEB_CONCURRENCY"),
        Some(&EnvValue {
            value: None,
            unknown: Some("unknown (from resourceFieldRef limits.cpu)".into()),
            possibly: false,
        })
    );
    assert_eq!(env.get("RAILS_MAX_THREADS"), None);
}
