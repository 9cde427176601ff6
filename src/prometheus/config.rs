//! The operator-wide Prometheus configuration file (`run --prometheus-config`, rendered by the
//! chart from Helm values) as it is written; `provider` resolves it against an experiment.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The operator-wide Prometheus configuration (docs/operations.md).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvidersConfig {
    /// Used when an experiment omits `analysis.prometheus.url` (and names no credentials set
    /// with a URL of its own).
    #[serde(default)]
    pub default: Option<ProviderSettings>,
    /// Named credentials sets an experiment refers to with `analysis.prometheus.credentials`.
    #[serde(default)]
    pub credentials: BTreeMap<String, ProviderSettings>,
    /// URL prefixes an experiment's Prometheus must be under; empty: any.
    #[serde(default)]
    pub allowed_urls: Vec<String>,
}

/// The default provider or one credentials set, as the configuration file writes it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderSettings {
    /// The default's URL; for a credentials set, the URL an experiment naming it gets when it
    /// sets none.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    #[serde(default)]
    pub basic_auth: Option<BasicAuthFiles>,
    #[serde(default)]
    pub tls: TlsSettings,
    /// Sent with every query; an experiment cannot override them (a tenant header the
    /// platform pins, e.g. `X-Scope-OrgID`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Credentials sets only: the namespaces whose experiments may use it; empty: all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Credentials sets only: URL prefixes its secrets may be sent to; empty: `url` alone if
    /// set, else wherever `allowedUrls` permits.
    #[serde(default)]
    pub urls: Vec<String>,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BasicAuthFiles {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub username_file: Option<PathBuf>,
    pub password_file: PathBuf,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsSettings {
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}
