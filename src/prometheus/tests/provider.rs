//! The operator's Prometheus configuration and what an experiment may ask of it.

use std::path::PathBuf;

use crate::api::PrometheusSource;
use crate::prometheus::endpoint::url_under;
use crate::prometheus::provider::{Auth, Username};
use crate::prometheus::{ProviderError, ProvidersConfig};

const CONFIG: &str = r#"
default:
  url: https://prometheus.monitoring:9090/prometheus/
  bearerTokenFile: /etc/concurrency-operator/secrets/prom-default/token
  tls: {caFile: /etc/concurrency-operator/secrets/prom-ca/ca.crt}
  headers: {X-Scope-OrgID: platform}
credentials:
  team-a:
    url: https://mimir.example/prometheus
    basicAuth:
      username: team-a
      passwordFile: /etc/concurrency-operator/secrets/team-a/password
    headers: {X-Scope-OrgID: team-a}
    namespaces: [shop]
  anywhere:
    bearerTokenFile: /etc/concurrency-operator/secrets/shared/token
allowedUrls:
  - https://prometheus.monitoring:9090/prometheus
  - https://mimir.example/
  - http://prometheus.shop:9090
"#;

fn config() -> ProvidersConfig {
    ProvidersConfig::parse(CONFIG).unwrap()
}

fn source(yaml: &str) -> PrometheusSource {
    serde_yaml::from_str(yaml).unwrap()
}

fn refused(yaml: &str, namespace: &str) -> String {
    match config().resolve(&source(yaml), namespace) {
        Err(e @ ProviderError::Spec { .. }) => e.to_string(),
        other => panic!("{yaml} in {namespace}: {other:?}"),
    }
}

#[test]
fn an_experiment_without_a_url_gets_the_default_whole() {
    let p = config().resolve(&source("{}"), "shop").unwrap();
    assert_eq!(p.url, "https://prometheus.monitoring:9090/prometheus");
    assert_eq!(
        p.auth,
        Auth::BearerTokenFile("/etc/concurrency-operator/secrets/prom-default/token".into())
    );
    assert_eq!(
        p.tls.ca_file,
        Some(PathBuf::from(
            "/etc/concurrency-operator/secrets/prom-ca/ca.crt"
        ))
    );
    assert_eq!(p.headers["X-Scope-OrgID"], "platform");
    // The same URL written out is the default too.
    let same = "url: https://prometheus.monitoring:9090/prometheus";
    assert_eq!(config().resolve(&source(same), "shop").unwrap(), p);
}

#[test]
fn the_defaults_secrets_never_go_to_an_experiments_own_url() {
    let p = config()
        .resolve(&source("url: http://prometheus.shop:9090"), "shop")
        .unwrap();
    assert_eq!(p.auth, Auth::None);
    assert!(p.tls.is_default());
    assert!(p.headers.is_empty());
}

#[test]
fn a_credentials_set_brings_its_url_secrets_and_pinned_headers() {
    let yaml = "credentials: team-a\nheaders: {X-Extra: one}\ntls: {serverName: mimir.internal}";
    let p = config().resolve(&source(yaml), "shop").unwrap();
    assert_eq!(p.url, "https://mimir.example/prometheus");
    assert_eq!(
        p.auth,
        Auth::Basic {
            username: Username::Literal("team-a".into()),
            password_file: "/etc/concurrency-operator/secrets/team-a/password".into(),
        }
    );
    assert_eq!(p.headers.len(), 2);
    assert_eq!(p.headers["X-Scope-OrgID"], "team-a");
    assert_eq!(p.tls.server_name.as_deref(), Some("mimir.internal"));
    assert_eq!(p.credentials.as_deref(), Some("team-a"));
}

#[test]
fn refusals_name_the_field() {
    let e = refused("credentials: team-b", "shop");
    assert!(
        e.starts_with("spec.analysis.prometheus.credentials: "),
        "{e}"
    );
    assert!(
        e.contains("\"team-b\"") && e.contains("known: anywhere, team-a"),
        "{e}"
    );

    let e = refused("credentials: team-a", "billing");
    assert!(
        e.starts_with("spec.analysis.prometheus.credentials: "),
        "{e}"
    );
    assert!(e.contains("namespace billing"), "{e}");

    // A set's secrets go only to its own URL: not to the tenant's server.
    let e = refused(
        "credentials: team-a\nurl: https://mimir.example/other",
        "shop",
    );
    assert!(e.starts_with("spec.analysis.prometheus.url: "), "{e}");
    assert!(
        e.contains("may only be sent to https://mimir.example/prometheus"),
        "{e}"
    );

    let e = refused("url: https://admin:hunter2@evil.example/", "shop");
    assert!(e.starts_with("spec.analysis.prometheus.url: "), "{e}");
    assert!(e.contains("outside the Prometheus URLs"), "{e}");
    assert!(!e.contains("hunter2"), "a password in a message: {e}");

    let e = refused(
        "url: http://prometheus.shop:9090\nheaders: {Authorization: Bearer x}",
        "shop",
    );
    assert!(
        e.starts_with("spec.analysis.prometheus.headers.Authorization: "),
        "{e}"
    );
    let e = refused("headers: {x-scope-orgid: team-b}", "shop");
    assert!(
        e.starts_with("spec.analysis.prometheus.headers.x-scope-orgid: "),
        "{e}"
    );
    assert!(e.contains("cannot override"), "{e}");
    let e = refused("headers: {\"Bad Name\": x}", "shop");
    assert!(e.contains("not a valid HTTP header name"), "{e}");
    let e = refused("headers: {X-Line: \"a\\nb\"}", "shop");
    assert!(e.contains("printable ASCII"), "{e}");
    let e = refused("tls: {serverName: \"not a name\"}", "shop");
    assert!(
        e.starts_with("spec.analysis.prometheus.tls.serverName: "),
        "{e}"
    );
}

#[test]
fn without_a_default_an_experiment_needs_a_url() {
    let none = ProvidersConfig::default();
    let e = none.resolve(&source("{}"), "shop").unwrap_err().to_string();
    assert!(
        e.starts_with("spec.analysis.prometheus.url: required"),
        "{e}"
    );
    assert!(e.contains("prometheus.default.url"), "{e}");
    // Without allowedUrls any URL goes, and a path prefix is kept.
    let p = none
        .resolve(&source("url: http://127.0.0.1:9/prom/"), "shop")
        .unwrap();
    assert_eq!(p.url, "http://127.0.0.1:9/prom");
}

#[test]
fn a_set_without_url_or_urls_goes_where_allowed_urls_permit() {
    let p = config()
        .resolve(
            &source("credentials: anywhere\nurl: http://prometheus.shop:9090"),
            "billing",
        )
        .unwrap();
    assert!(matches!(p.auth, Auth::BearerTokenFile(_)));
}

#[test]
fn prefixes_match_whole_hosts_and_path_segments() {
    assert!(url_under("https://a:443/prom", "https://a/prom"));
    assert!(url_under("https://a/prom/x/", "https://a/prom/"));
    assert!(!url_under("https://a/prometheus", "https://a/prom"));
    assert!(!url_under("https://a.evil/", "https://a"));
    assert!(!url_under("http://a/prom", "https://a/prom"));
    assert!(!url_under("https://a:8443/prom", "https://a/prom"));
    assert!(url_under("https://u:p@a/prom", "https://a/"));
}

#[test]
fn a_bad_configuration_file_is_refused_naming_the_field() {
    for (yaml, want) in [
        ("default: {bearerTokenFile: /t}", "default.url"),
        ("default: {url: ftp://x}", "default.url"),
        ("default: {url: 'http://x', namespaces: [a]}", "default"),
        (
            "credentials: {a: {bearerTokenFile: /t, basicAuth: {username: u, passwordFile: /p}}}",
            "credentials.a",
        ),
        (
            "credentials: {a: {basicAuth: {passwordFile: /p}}}",
            "credentials.a.basicAuth",
        ),
        (
            "credentials: {a: {headers: {Authorization: x}}}",
            "credentials.a.headers.Authorization",
        ),
        ("allowedUrls: [nope]", "allowedUrls[0]"),
        (
            "allowedUrls: ['http://a']\ndefault: {url: 'http://b'}",
            "default.url",
        ),
        ("defualt: {url: 'http://b'}", "file"),
    ] {
        let e = ProvidersConfig::parse(yaml).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("Prometheus configuration {want}: ")),
            "{yaml}: {e}"
        );
    }
    assert_eq!(
        ProvidersConfig::parse("").unwrap(),
        ProvidersConfig::default()
    );
}

/// What `tests/helm_chart.rs` renders from the chart's values (its ConfigMap's
/// `prometheus.yaml`), as the operator reads it at start-up.
#[test]
fn the_charts_rendering_is_a_valid_configuration() {
    let rendered = include_str!("chart-rendered-prometheus.yaml");
    let c = ProvidersConfig::parse(rendered).unwrap();
    let p = c.resolve(&source("credentials: team-a"), "team-a").unwrap();
    assert_eq!(p.url, "https://mimir.example/prometheus");
    assert!(matches!(
        p.auth,
        Auth::Basic {
            username: Username::File(_),
            ..
        }
    ));
    let d = c.resolve(&source("{}"), "shop").unwrap();
    assert!(matches!(d.auth, Auth::BearerTokenFile(_)));
}
