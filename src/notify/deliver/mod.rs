//! Notifications, the I/O part: a `Notifier` the reconcile hands notifications to, and one
//! delivery task per sink (the generic webhook, a Slack-compatible webhook) behind a bounded
//! queue. What is sent is decided by `crate::notify`; here it is only delivered.
//!
//! - Never blocks a reconcile: `notify` is a `try_send`; a full queue drops the notification
//!   (counted as `result="dropped"`) rather than wait.
//! - Bounded retries with exponential backoff (`RetryPolicy`), on connection errors, timeouts,
//!   5xx, 408 and 429; any other answer is final. A sink delivers in order, one at a time, so a
//!   receiver sees a rollout's notifications in the order they were decided.
//! - URLs and the signing key are files (a Secret mounted by the chart; the operator never reads
//!   Secrets through the API). They are read again for every attempt: a rotated Secret is used
//!   as soon as the kubelet updates the files, without a restart.
//! - On shutdown `flush` waits a bounded time for what is queued; what is left is lost (a
//!   restarted operator never re-derives it: see `crate::notify::derive`).
//! - URLs are never logged (a Slack webhook URL is a credential): only the sink and host.

mod http;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

pub use http::{DeliveryError, DELIVERY_HEADER, EVENT_HEADER};

use crate::notify::{Filter, Notification, SlackOptions};
use crate::telemetry::Metrics;

/// The generic webhook: its URL, and the HMAC key it is signed with (unsigned without one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookSink {
    pub url_file: PathBuf,
    pub signing_key_file: Option<PathBuf>,
}

/// A Slack-compatible incoming webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlackSink {
    pub url_file: PathBuf,
    pub options: SlackOptions,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per notification and sink, the first included.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each one after, up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Bound of one attempt (connect, send, answer).
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts over about 15 s (1 + 2 + 4 + 8 s of backoff), 5 s each at most.
    fn default() -> Self {
        Self {
            attempts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Everything `Notifier::start` needs; built from the command line in `main`.
#[derive(Clone, Debug, Default)]
pub struct NotifierConfig {
    pub webhook: Option<WebhookSink>,
    pub slack: Option<SlackSink>,
    pub filter: Filter,
    /// Named in every payload, for receivers that hear several clusters.
    pub cluster: Option<String>,
    pub retry: RetryPolicy,
    /// Notifications waiting per sink before new ones are dropped.
    pub queue: usize,
}

/// Metric label of each sink.
pub const SINK_WEBHOOK: &str = "webhook";
pub const SINK_SLACK: &str = "slack";

/// Where a reconcile hands its notifications. Cheap to clone; the default sends nothing.
#[derive(Clone, Default)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    filter: Filter,
    queues: Vec<Queue>,
    metrics: Metrics,
    /// Queued or being delivered, over all sinks (what `flush` waits for).
    pending: Arc<AtomicUsize>,
}

/// One sink's queue. `delivered`: a worker takes from it and counts it down in `pending` (the
/// test channel has none).
struct Queue {
    sink: &'static str,
    tx: mpsc::Sender<Notification>,
    delivered: bool,
}

impl Notifier {
    /// Starts one delivery task per configured sink (on the current Tokio runtime); with no
    /// sink configured, a notifier that sends nothing.
    pub fn start(config: NotifierConfig, metrics: Metrics) -> Notifier {
        let capacity = config.queue.max(1);
        let pending = Arc::new(AtomicUsize::new(0));
        let mut queues = Vec::new();
        let sinks = [
            config.webhook.clone().map(http::Sink::Webhook),
            config.slack.clone().map(http::Sink::Slack),
        ];
        for sink in sinks.into_iter().flatten() {
            warn_if_missing(&sink);
            let (tx, rx) = mpsc::channel(capacity);
            let name = sink.name();
            let worker = http::Worker {
                sink,
                client: http::http_client(config.retry.timeout),
                retry: config.retry.clone(),
                cluster: config.cluster.clone(),
                metrics: metrics.clone(),
                pending: pending.clone(),
            };
            tokio::spawn(worker.run(rx));
            queues.push(Queue {
                sink: name,
                tx,
                delivered: true,
            });
        }
        if queues.is_empty() {
            return Notifier::default();
        }
        Notifier {
            inner: Some(Arc::new(Inner {
                filter: config.filter,
                queues,
                metrics,
                pending,
            })),
        }
    }

    /// A notifier whose one sink is the returned receiver (sink label `channel`): what the
    /// controller's tests read what a reconcile would send from.
    pub fn channel(
        filter: Filter,
        capacity: usize,
        metrics: Metrics,
    ) -> (Notifier, mpsc::Receiver<Notification>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let inner = Inner {
            filter,
            queues: vec![Queue {
                sink: "channel",
                tx,
                delivered: false,
            }],
            metrics,
            pending: Arc::new(AtomicUsize::new(0)),
        };
        (
            Notifier {
                inner: Some(Arc::new(inner)),
            },
            rx,
        )
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Queues each notification the filter allows on every sink; returns at once.
    pub fn notify(&self, notifications: Vec<Notification>) {
        let Some(inner) = &self.inner else {
            return;
        };
        for n in notifications
            .into_iter()
            .filter(|n| inner.filter.allows(n.kind))
        {
            for q in &inner.queues {
                let sink = q.sink;
                // Counted before the send, so the worker's decrement can never come first.
                if q.delivered {
                    inner.pending.fetch_add(1, Ordering::SeqCst);
                }
                match q.tx.try_send(n.clone()) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(n)) => {
                        inner.unqueued(q);
                        tracing::warn!(sink, kind = %n.kind, id = %n.id, "notification queue full: dropped");
                        inner.metrics.record_notification(sink, "dropped");
                    }
                    Err(mpsc::error::TrySendError::Closed(n)) => {
                        inner.unqueued(q);
                        tracing::warn!(sink, kind = %n.kind, id = %n.id, "notification sink stopped: dropped");
                        inner.metrics.record_notification(sink, "dropped");
                    }
                }
            }
        }
    }
}

impl Notifier {
    /// Waits until every queued notification is delivered or given up, at most `timeout`: on
    /// shutdown, so a decision made just before a rolling update is still told. True when
    /// nothing is left.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let Some(inner) = &self.inner else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if inner.pending.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Inner {
    fn unqueued(&self, q: &Queue) {
        if q.delivered {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Said once at start, since deliveries only fail later: a key the Secret lacks, or a Secret
/// not mounted.
fn warn_if_missing(sink: &http::Sink) {
    let files = match sink {
        http::Sink::Webhook(w) => vec![Some(&w.url_file), w.signing_key_file.as_ref()],
        http::Sink::Slack(s) => vec![Some(&s.url_file)],
    };
    for path in files.into_iter().flatten() {
        if !path.is_file() {
            tracing::warn!(sink = sink.name(), path = %path.display(), "notification file not found (yet): deliveries fail until it exists");
        }
    }
}

#[cfg(test)]
mod tests;
