//! Which Prometheus an experiment asks, and with what: the operator-wide configuration file
//! (`run --prometheus-config`, rendered by the chart from Helm values) and its resolution
//! against an experiment's `spec.analysis.prometheus`. Pure: files are named here, read by the
//! client.
//!
//! The security design: secrets reach the operator only as files the platform team mounts,
//! and only this file names them. An experiment refers to a credentials set by name and may
//! set only what is not secret (URL, headers other than credentials, TLS server name and
//! verification). Otherwise a tenant could name the operator's own ServiceAccount token as a
//! "token file" and send it to a URL of its choosing. A credentials set is refused outside
//! its `namespaces`, and its secrets go only to its `urls` (or `url`).

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use super::config::{BasicAuthFiles, ProviderSettings, ProvidersConfig, TlsSettings};
use super::endpoint::{base_url, check_headers, rustls_name, same_url, url_under};
pub use super::endpoint::{MAX_HEADERS, MAX_HEADER_VALUE};
use crate::api::PrometheusSource;

/// Longest Prometheus URL.
pub const MAX_URL: usize = 2048;

/// How a query authenticates. Files are read at every query, so a rotated Secret is used as
/// soon as the kubelet updates the mount.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Auth {
    #[default]
    None,
    BearerTokenFile(PathBuf),
    Basic {
        username: Username,
        password_file: PathBuf,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Username {
    Literal(String),
    File(PathBuf),
}

/// TLS of one provider: the CA to trust instead of the system's, the name the certificate
/// must carry instead of the URL's host, or no verification at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    pub ca_file: Option<PathBuf>,
    pub server_name: Option<String>,
    pub insecure_skip_verify: bool,
}

impl Tls {
    pub fn is_default(&self) -> bool {
        *self == Tls::default()
    }
}

/// Everything a client needs, resolved: the key of the controller's client cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Provider {
    pub url: String,
    pub auth: Auth,
    pub tls: Tls,
    pub headers: BTreeMap<String, String>,
    /// The credentials set it came from (for messages), `None` for the default or none.
    pub credentials: Option<String>,
}

impl Provider {
    /// A provider with nothing but a URL (the kubectl plugin, tests).
    pub fn from_url(url: &str) -> Self {
        Provider {
            url: url.to_string(),
            ..Default::default()
        }
    }
}

/// Why a configuration file or an experiment's `analysis.prometheus` cannot be used; the
/// message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("{field}: {message}")]
    Spec { field: String, message: String },
    #[error("Prometheus configuration {field}: {message}")]
    Config { field: String, message: String },
}

impl ProviderError {
    pub fn category(&self) -> &'static str {
        match self {
            ProviderError::Spec { .. } => "InvalidPrometheus",
            ProviderError::Config { .. } => "InvalidPrometheusConfig",
        }
    }
}

fn spec(field: impl Into<String>, message: impl Into<String>) -> ProviderError {
    ProviderError::Spec {
        field: field.into(),
        message: message.into(),
    }
}

fn config(field: impl Into<String>, message: impl Into<String>) -> ProviderError {
    ProviderError::Config {
        field: field.into(),
        message: message.into(),
    }
}

const FIELD: &str = "spec.analysis.prometheus";

impl ProvidersConfig {
    /// Parses and checks the configuration file's text: every problem is refused at start-up
    /// rather than found by the first experiment.
    pub fn parse(yaml: &str) -> Result<Self, ProviderError> {
        let c: ProvidersConfig = match yaml.trim() {
            "" => ProvidersConfig::default(),
            text => serde_yaml::from_str(text).map_err(|e| config("file", e.to_string()))?,
        };
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), ProviderError> {
        for (i, prefix) in self.allowed_urls.iter().enumerate() {
            base_url(prefix).map_err(|m| config(format!("allowedUrls[{i}]"), m))?;
        }
        if let Some(d) = &self.default {
            let url = d
                .url
                .as_deref()
                .ok_or_else(|| config("default.url", "the default provider needs a URL"))?;
            base_url(url).map_err(|m| config("default.url", m))?;
            if !self.allowed(url) {
                return Err(config("default.url", "is outside allowedUrls"));
            }
            if !d.namespaces.is_empty() || !d.urls.is_empty() {
                return Err(config(
                    "default",
                    "namespaces and urls belong to credentials sets; the default serves every \
                     namespace at its own url",
                ));
            }
            settings_auth("default", d)?;
            check_headers("default.headers", &d.headers, false).map_err(|(f, m)| config(f, m))?;
        }
        for (name, set) in &self.credentials {
            let at = format!("credentials.{name}");
            if name.is_empty() || name.len() > 63 {
                return Err(config(at, "a name of 1 to 63 characters"));
            }
            if let Some(url) = &set.url {
                base_url(url).map_err(|m| config(format!("{at}.url"), m))?;
            }
            for (i, prefix) in set.urls.iter().enumerate() {
                base_url(prefix).map_err(|m| config(format!("{at}.urls[{i}]"), m))?;
            }
            settings_auth(&at, set)?;
            check_headers(&format!("{at}.headers"), &set.headers, false)
                .map_err(|(f, m)| config(f, m))?;
        }
        Ok(())
    }

    /// Whether `url` is under one of `allowedUrls` (empty: any).
    pub fn allowed(&self, url: &str) -> bool {
        self.allowed_urls.is_empty() || self.allowed_urls.iter().any(|p| url_under(url, p))
    }

    /// The provider an experiment in `namespace` queries, or why it cannot (naming the field).
    pub fn resolve(
        &self,
        source: &PrometheusSource,
        namespace: &str,
    ) -> Result<Provider, ProviderError> {
        let own_url = Some(source.url.trim()).filter(|u| !u.is_empty());
        let (base, name) = match source.credentials.as_deref() {
            Some(name) => {
                let field = format!("{FIELD}.credentials");
                let set = self.credentials.get(name).ok_or_else(|| {
                    let known: Vec<&str> = self.credentials.keys().map(String::as_str).collect();
                    spec(
                        &field,
                        format!(
                            "no credentials set {name:?} in the operator's Prometheus \
                             configuration (known: {})",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    )
                })?;
                if !set.namespaces.is_empty() && !set.namespaces.iter().any(|n| n == namespace) {
                    return Err(spec(
                        field,
                        format!(
                            "credentials set {name:?} may not be used in namespace {namespace}"
                        ),
                    ));
                }
                (Some(set), Some(name))
            }
            None => (None, None),
        };
        let default = self.default.as_ref();
        let default_url = default.and_then(|d| d.url.as_deref());
        let url = own_url
            .or(base.and_then(|s| s.url.as_deref()))
            .or(default_url)
            .ok_or_else(|| {
                spec(
                    format!("{FIELD}.url"),
                    "required: the operator has no default Prometheus (Helm value \
                     prometheus.default.url)",
                )
            })?;
        let url_field = match own_url {
            Some(_) => format!("{FIELD}.url"),
            None => format!("{FIELD}.credentials"),
        };
        if url.len() > MAX_URL {
            return Err(spec(url_field, format!("longer than {MAX_URL} characters")));
        }
        base_url(url).map_err(|m| spec(&url_field, m))?;
        if !self.allowed(url) {
            return Err(spec(
                url_field,
                format!(
                    "{} is outside the Prometheus URLs the operator allows ({})",
                    crate::telemetry::redact::url_for_display(url),
                    self.allowed_urls.join(", ")
                ),
            ));
        }
        // Whose secrets and settings: the named set's; else the default's, but only at the
        // default's own URL (an experiment pointing elsewhere never carries them).
        let settings = match (base, default) {
            (Some(set), _) => {
                let destinations: Vec<&str> = match (set.urls.is_empty(), set.url.as_deref()) {
                    (false, _) => set.urls.iter().map(String::as_str).collect(),
                    (true, Some(u)) => vec![u],
                    (true, None) => Vec::new(),
                };
                if !destinations.is_empty() && !destinations.iter().any(|p| url_under(url, p)) {
                    return Err(spec(
                        url_field,
                        format!(
                            "credentials set {:?} may only be sent to {}",
                            name.unwrap_or_default(),
                            destinations.join(", ")
                        ),
                    ));
                }
                Some(set)
            }
            (None, Some(d)) if default_url.is_some_and(|d| same_url(d, url)) => Some(d),
            (None, _) => None,
        };
        let mut headers = BTreeMap::new();
        let mut tls = Tls::default();
        let mut auth = Auth::None;
        if let Some(s) = settings {
            headers = s.headers.clone();
            auth = settings_auth("credentials", s)?;
            tls = Tls {
                ca_file: s.tls.ca_file.clone(),
                server_name: s.tls.server_name.clone(),
                insecure_skip_verify: s.tls.insecure_skip_verify,
            };
        }
        check_headers(&format!("{FIELD}.headers"), &source.headers, true)
            .map_err(|(f, m)| spec(f, m))?;
        for (k, v) in &source.headers {
            if headers.keys().any(|h| h.eq_ignore_ascii_case(k)) {
                return Err(spec(
                    format!("{FIELD}.headers.{k}"),
                    "set by the operator's Prometheus configuration; an experiment cannot \
                     override it",
                ));
            }
            headers.insert(k.clone(), v.clone());
        }
        if headers.len() > MAX_HEADERS {
            return Err(spec(
                format!("{FIELD}.headers"),
                format!("more than {MAX_HEADERS} headers with the configuration's"),
            ));
        }
        if let Some(t) = &source.tls {
            if let Some(name) = t.server_name.as_deref().filter(|n| !n.is_empty()) {
                if rustls_name(name).is_none() {
                    return Err(spec(
                        format!("{FIELD}.tls.serverName"),
                        format!("{name:?} is not a DNS name or IP address"),
                    ));
                }
                tls.server_name = Some(name.to_string());
            }
            tls.insecure_skip_verify |= t.insecure_skip_verify;
        }
        Ok(Provider {
            url: url.trim_end_matches('/').to_string(),
            auth,
            tls,
            headers,
            credentials: name.map(str::to_string),
        })
    }
}

fn settings_auth(at: &str, s: &ProviderSettings) -> Result<Auth, ProviderError> {
    match (&s.bearer_token_file, &s.basic_auth) {
        (Some(_), Some(_)) => Err(config(
            at,
            "bearerTokenFile and basicAuth exclude each other",
        )),
        (Some(token), None) => Ok(Auth::BearerTokenFile(token.clone())),
        (None, Some(b)) => {
            let username = match (&b.username, &b.username_file) {
                (Some(u), None) => Username::Literal(u.clone()),
                (None, Some(f)) => Username::File(f.clone()),
                _ => {
                    return Err(config(
                        format!("{at}.basicAuth"),
                        "exactly one of username and usernameFile",
                    ))
                }
            };
            Ok(Auth::Basic {
                username,
                password_file: b.password_file.clone(),
            })
        }
        (None, None) => Ok(Auth::None),
    }
}
