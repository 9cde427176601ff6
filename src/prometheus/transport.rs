//! The HTTP plumbing under the client: the reqwest client (no redirects, the provider's TLS,
//! no panic without CA certificates), a body read under a cap, secret files read at each query.

use tokio::io::AsyncReadExt;

use super::provider::Provider;
use super::tls::tls_config;
use crate::analysis::PrometheusError;
use crate::telemetry::redact::error_chain;

/// Largest token, username or password file read (a JWT is a few KiB).
const MAX_SECRET_BYTES: u64 = 64 * 1024;

pub(super) fn percent_decode(s: &str) -> String {
    // Userinfo is percent-encoded in a URL; `form_urlencoded` decodes the same escapes
    // (and `+`, which a userinfo does not use unescaped).
    form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// A secret file's content, without the trailing newline `kubectl create secret --from-file`
/// keeps; read at every query so a rotated Secret is used without a restart.
pub(super) async fn read_secret(
    path: &std::path::Path,
    what: &str,
) -> Result<String, PrometheusError> {
    let fail = |message: String| {
        PrometheusError::Credentials(format!(
            "reading the {what} file {}: {message}",
            path.display()
        ))
    };
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(fail(format!("larger than {MAX_SECRET_BYTES} bytes")));
    }
    let text = text.trim_end_matches(['\r', '\n']).to_string();
    if text.is_empty() {
        return Err(fail("empty".into()));
    }
    Ok(text)
}

pub(super) enum Capped {
    TooLarge,
    Transport(reqwest::Error),
}

/// The body, read chunk by chunk and given up as soon as it passes `cap` bytes: memory per
/// query stays under `cap` plus one chunk whatever the server sends.
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, Capped> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(Capped::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(Capped::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The HTTP client, built so that failures are errors: `reqwest::Client::new()` panics when
/// no CA certificates can be loaded, as in an image without a CA bundle. A plain `http://` URL
/// needs none, so it gets a client that trusts no certificate authority (an https redirect
/// then fails verification instead of connecting unverified); an `https://` URL reports what
/// is missing. A provider with TLS settings gets its own rustls configuration.
pub(super) fn http_client(
    provider: &Provider,
    display: &str,
    idle_per_host: usize,
) -> Result<reqwest::Client, PrometheusError> {
    let builder = || {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("concurrency-operator/", env!("CARGO_PKG_VERSION")))
            // The connection pool is per client; one idle connection per slot is plenty.
            .pool_max_idle_per_host(idle_per_host)
    };
    let setup = |message: String| PrometheusError::ClientSetup {
        url: display.to_string(),
        message,
    };
    if !provider.tls.is_default() {
        let config = tls_config(&provider.tls).map_err(setup)?;
        return builder()
            .tls_backend_preconfigured(config)
            .build()
            .map_err(|e| setup(error_chain(&e)));
    }
    let error = match builder().build() {
        Ok(client) => return Ok(client),
        Err(e) => e,
    };
    if provider.url.trim_start().starts_with("http://") {
        tracing::debug!(error = %error_chain(&error), "no usable TLS roots; Prometheus is plain http");
        builder()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|e| setup(error_chain(&e)))
    } else {
        Err(setup(format!(
            "{}; an https URL needs CA certificates: install a CA bundle in the operator \
             image (/etc/ssl/certs/ca-certificates.crt), point SSL_CERT_FILE at one, or set \
             the provider's tls.caFile",
            error_chain(&error)
        )))
    }
}
