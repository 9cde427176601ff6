//! Where and how a provider may ask, checked: its URLs (http(s), a host, nothing appended;
//! one under an allowed prefix) and its extra headers (tokens, never credentials or framing).

use std::collections::BTreeMap;

/// Headers an experiment or the configuration may add, at most.
pub const MAX_HEADERS: usize = 16;
/// Longest header value (a tenant ID, a routing key): bounded like everything a tenant sets.
pub const MAX_HEADER_VALUE: usize = 1024;

/// Headers carrying credentials, or framing the request, are never taken from an experiment
/// (credentials come from files), nor from the headers map of the configuration.
const RESERVED_HEADERS: [&str; 7] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
];

/// Header names must be HTTP tokens and values visible ASCII (a value is sent as is).
pub(super) fn check_headers(
    field: &str,
    headers: &BTreeMap<String, String>,
    tenant: bool,
) -> Result<(), (String, String)> {
    if headers.len() > MAX_HEADERS {
        return Err((field.into(), format!("at most {MAX_HEADERS} headers")));
    }
    for (k, v) in headers {
        let at = format!("{field}.{k}");
        let token = !k.is_empty()
            && k.len() <= 256
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err((at, "not a valid HTTP header name".into()));
        }
        if RESERVED_HEADERS.iter().any(|r| k.eq_ignore_ascii_case(r)) {
            let why = match tenant {
                true => {
                    "may not be set by an experiment: credentials come from the operator's \
                         configuration (analysis.prometheus.credentials)"
                }
                false => {
                    "is set by the operator itself (use bearerTokenFile or basicAuth for \
                          credentials)"
                }
            };
            return Err((at, why.into()));
        }
        if v.len() > MAX_HEADER_VALUE || !v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
        {
            return Err((
                at,
                format!("the value must be printable ASCII of at most {MAX_HEADER_VALUE} bytes"),
            ));
        }
    }
    Ok(())
}

/// The TLS name `name` stands for, if it is one.
pub fn rustls_name(name: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    rustls::pki_types::ServerName::try_from(name.to_string()).ok()
}

/// Checks a base URL: http(s), a host, no query or fragment (the API path is appended).
pub fn base_url(url: &str) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| {
        format!(
            "{} is not a URL: {e}",
            crate::telemetry::redact::url_for_display(url)
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("must be an http:// or https:// URL with a host".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("must not have a query or fragment: the API path is appended to it".into());
    }
    Ok(parsed)
}

/// Whether `url` is under the prefix `prefix`: same scheme, host and port, and a path that is
/// the prefix's or below it (`https://a/prom` covers `https://a/prom/x`, not
/// `https://a/prometheus` nor `https://a.evil/`).
pub fn url_under(url: &str, prefix: &str) -> bool {
    let (Ok(u), Ok(p)) = (
        reqwest::Url::parse(url.trim()),
        reqwest::Url::parse(prefix.trim()),
    ) else {
        return false;
    };
    let path = p.path().trim_end_matches('/');
    let below = u.path().trim_end_matches('/');
    u.scheme() == p.scheme()
        && u.host_str() == p.host_str()
        && u.port_or_known_default() == p.port_or_known_default()
        && (below == path || below.starts_with(&format!("{path}/")))
}

pub(super) fn same_url(a: &str, b: &str) -> bool {
    a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/')
}
