//! One sink's delivery task: take the next notification, build its body, POST it, retry with
//! backoff within the policy, count the outcome.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{RetryPolicy, SlackSink, WebhookSink, SINK_SLACK, SINK_WEBHOOK};
use crate::notify::{self, Notification};
use crate::telemetry::redact::error_chain;
use crate::telemetry::Metrics;

/// The notification's kind, e.g. `RolledBack`.
pub const EVENT_HEADER: &str = "X-Concurrency-Event";
/// The notification's `id`: the same on every attempt, so a receiver can drop repeats.
pub const DELIVERY_HEADER: &str = "X-Concurrency-Delivery";

#[derive(Clone, Debug)]
pub(super) enum Sink {
    Webhook(WebhookSink),
    Slack(SlackSink),
}

impl Sink {
    pub fn name(&self) -> &'static str {
        match self {
            Sink::Webhook(_) => SINK_WEBHOOK,
            Sink::Slack(_) => SINK_SLACK,
        }
    }
}

/// Why one attempt failed. URLs are never part of the message: a webhook URL is a credential.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("reading {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no http(s) URL")]
    BadUrl { path: PathBuf },
    #[error("sending to {host}: {message}")]
    Transport { host: String, message: String },
    #[error("{host} answered HTTP {status}")]
    Status { host: String, status: u16 },
    #[error("no HTTP client: {0}")]
    Client(String),
    #[error("encoding the body: {0}")]
    Encode(#[from] serde_json::Error),
}

impl DeliveryError {
    /// Short category for logs.
    pub fn category(&self) -> &'static str {
        match self {
            DeliveryError::ReadFile { .. } => "ReadFile",
            DeliveryError::BadUrl { .. } => "BadUrl",
            DeliveryError::Transport { .. } => "Transport",
            DeliveryError::Status { .. } => "HttpStatus",
            DeliveryError::Client(_) => "HttpClient",
            DeliveryError::Encode(_) => "Encode",
        }
    }

    /// Worth another attempt: the receiver may be back, or the Secret mounted, by then. Any
    /// other HTTP answer (400, 401, 404…) will not change by repeating the same request.
    pub fn retryable(&self) -> bool {
        match self {
            DeliveryError::Status { status, .. } => {
                *status >= 500 || *status == 408 || *status == 429
            }
            DeliveryError::Encode(_) | DeliveryError::BadUrl { .. } | DeliveryError::Client(_) => {
                false
            }
            DeliveryError::ReadFile { .. } | DeliveryError::Transport { .. } => true,
        }
    }
}

pub(super) struct Worker {
    pub sink: Sink,
    /// An error when no HTTP client could be built: every attempt then fails with it.
    pub client: Result<reqwest::Client, String>,
    pub retry: RetryPolicy,
    pub cluster: Option<String>,
    pub metrics: Metrics,
    /// Shared with the `Notifier`: decremented once a notification is done with.
    pub pending: Arc<AtomicUsize>,
}

impl Worker {
    /// Runs until every `Notifier` clone is dropped.
    pub async fn run(self, mut rx: mpsc::Receiver<Notification>) {
        let sink = self.sink.name();
        while let Some(n) = rx.recv().await {
            match self.deliver(&n).await {
                Ok(attempts) => {
                    tracing::info!(sink, kind = %n.kind, id = %n.id, attempts, "notification sent");
                    self.metrics.record_notification(sink, "sent");
                }
                Err((attempts, e)) => {
                    tracing::warn!(sink, kind = %n.kind, id = %n.id, attempts, category = e.category(), error = %e, "notification not delivered");
                    self.metrics.record_notification(sink, "failed");
                }
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The attempts it took, or the last error after the policy's bound.
    async fn deliver(&self, n: &Notification) -> Result<u32, (u32, DeliveryError)> {
        let mut backoff = self.retry.initial_backoff;
        let mut attempt = 1;
        loop {
            match self.attempt(n).await {
                Ok(()) => return Ok(attempt),
                Err(e) if !e.retryable() || attempt >= self.retry.attempts => {
                    return Err((attempt, e))
                }
                Err(e) => {
                    tracing::debug!(sink = self.sink.name(), id = %n.id, attempt, error = %e, retry_in = ?backoff, "notification attempt failed");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2).min(self.retry.max_backoff);
            attempt += 1;
        }
    }

    async fn attempt(&self, n: &Notification) -> Result<(), DeliveryError> {
        let cluster = self.cluster.as_deref();
        let (url_file, body, key) = match &self.sink {
            Sink::Webhook(w) => {
                let key = match &w.signing_key_file {
                    Some(path) => Some(read_trimmed(path).await?),
                    None => None,
                };
                (&w.url_file, notify::webhook_body(n, cluster), key)
            }
            Sink::Slack(s) => (
                &s.url_file,
                notify::slack_body(n, &s.options, cluster),
                None,
            ),
        };
        let url = read_url(url_file).await?;
        let host = url.host_str().unwrap_or_default().to_string();
        let body = serde_json::to_vec(&body)?;
        let client = self
            .client
            .as_ref()
            .map_err(|m| DeliveryError::Client(m.clone()))?;
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_HEADER, n.kind.as_str())
            .header(DELIVERY_HEADER, &n.id);
        if let Some(key) = key {
            let now = jiff::Timestamp::now().as_second();
            request = request
                .header(
                    notify::SIGNATURE_HEADER,
                    notify::signature(key.as_bytes(), &body),
                )
                .header(notify::TIMESTAMP_HEADER, now.to_string())
                .header(
                    notify::TIMESTAMPED_SIGNATURE_HEADER,
                    notify::timestamped_signature(key.as_bytes(), now, &body),
                );
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| DeliveryError::Transport {
                host: host.clone(),
                message: error_chain(&e.without_url()),
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(DeliveryError::Status {
                host,
                status: status.as_u16(),
            })
        }
    }
}

/// A file's content without the trailing newline `kubectl create secret --from-file` keeps.
async fn read_trimmed(path: &Path) -> Result<String, DeliveryError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| DeliveryError::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

async fn read_url(path: &Path) -> Result<reqwest::Url, DeliveryError> {
    let text = read_trimmed(path).await?;
    let bad = || DeliveryError::BadUrl {
        path: path.to_path_buf(),
    };
    let url = reqwest::Url::parse(text.trim()).map_err(|_| bad())?;
    if matches!(url.scheme(), "http" | "https") {
        Ok(url)
    } else {
        Err(bad())
    }
}

/// Redirects are not followed (a webhook that moved is a configuration to fix, and a redirect
/// would carry the signed body elsewhere). Without CA certificates the client still builds and
/// serves `http://` receivers; an `https://` one then fails per attempt, with that reason.
pub(super) fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    let builder = || {
        reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("concurrency-operator/", env!("CARGO_PKG_VERSION")))
    };
    match builder().build() {
        Ok(client) => Ok(client),
        Err(e) => {
            tracing::warn!(error = %error_chain(&e), "no usable TLS roots: https webhooks will fail");
            builder()
                .tls_certs_only(std::iter::empty())
                .build()
                .map_err(|e| error_chain(&e))
        }
    }
}
