//! The load loops, independent of HTTP so their scheduling is testable on tokio's paused
//! clock.
//!
//! Open model (like wrk2 `-R`): request *i* is due at `start + i / rate`. A free connection
//! takes the next due request, waits for its time, sends it, and the latency is measured from
//! the *due* time — a request that had to wait for a busy connection carries that wait, so a
//! slow server cannot hide its queue (coordinated omission). Requests still waiting to be sent
//! when the drain deadline (end + timeout) passes are counted as `unsent`.
//!
//! Closed model (like wrk `-c`): each connection sends its next request as soon as the last
//! one answers, until the end; answers still outstanding at the end are abandoned and not
//! counted, as wrk does. Its throughput is the server's capacity at that concurrency.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    Open { rate: f64 },
    Closed,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub model: Model,
    pub duration: Duration,
    pub connections: usize,
    pub timeout: Duration,
    /// Reconnect before a request once the connection is this old (the sender's job; here
    /// for the report).
    pub max_connection_age: Option<Duration>,
}

pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<u16, String>> + Send + 'a>>;

/// One connection's way of sending a request and returning the response status.
pub trait Sender: Send + 'static {
    fn send(&mut self) -> SendFuture<'_>;

    /// Connections this sender has opened so far (a sender with no real connection: 0).
    fn connections_opened(&self) -> u64 {
        0
    }

    /// Where its last request got to and on what connection (e.g. `response, on a connection
    /// 3.2 s old`): read after a failure, so a timeout says what it waited for.
    fn state(&self) -> String {
        String::new()
    }
}

/// The failures kept with their details (the counts cover all of them).
pub const KEPT_FAILURES: usize = 20;

/// One failed request, for finding its cause afterwards (e.g. beside the cluster's events).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    /// When it was sent, milliseconds since the Unix epoch (the wall clock, to compare with
    /// other logs).
    pub sent_unix_ms: u64,
    /// Seconds from the start of the load.
    pub after_s: f64,
    /// `error` or `timeout`.
    pub kind: &'static str,
    /// The sender's [`Sender::state`] when it failed.
    pub state: String,
    /// The error (none for a timeout).
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Results {
    /// Latency of answered requests, microseconds.
    pub latency_us: Histogram<u64>,
    pub statuses: BTreeMap<u16, u64>,
    pub errors: u64,
    pub timeouts: u64,
    /// Open model: due but never sent before the drain deadline.
    pub unsent: u64,
    /// Closed model: still outstanding at the end.
    pub abandoned: u64,
    /// Connections opened, reconnects included.
    pub connections_opened: u64,
    /// From start to the last answer (closed model: the duration).
    pub elapsed: Duration,
    pub last_error: Option<String>,
    /// The first [`KEPT_FAILURES`] failures, in the order they were sent.
    pub failures: Vec<Failure>,
}

impl Results {
    fn new() -> Self {
        Results {
            // 1 µs .. 1 h, 3 significant digits; cannot fail for these bounds.
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("constant histogram bounds are valid"),
            statuses: BTreeMap::new(),
            errors: 0,
            timeouts: 0,
            unsent: 0,
            abandoned: 0,
            connections_opened: 0,
            elapsed: Duration::ZERO,
            last_error: None,
            failures: Vec::new(),
        }
    }

    fn merge(&mut self, o: Results) {
        let _ = self.latency_us.add(&o.latency_us);
        for (s, n) in o.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.unsent += o.unsent;
        self.abandoned += o.abandoned;
        self.connections_opened += o.connections_opened;
        self.elapsed = self.elapsed.max(o.elapsed);
        if o.last_error.is_some() {
            self.last_error = o.last_error;
        }
        self.failures.extend(o.failures);
        self.failures
            .sort_by(|a, b| a.after_s.total_cmp(&b.after_s));
        self.failures.truncate(KEPT_FAILURES);
    }

    fn failed(
        &mut self,
        sender: &dyn Sender,
        sent: std::time::SystemTime,
        after: Duration,
        error: Option<String>,
    ) {
        if self.failures.len() < KEPT_FAILURES {
            let sent_unix_ms = sent
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            self.failures.push(Failure {
                sent_unix_ms,
                after_s: after.as_secs_f64(),
                kind: if error.is_some() { "error" } else { "timeout" },
                state: sender.state(),
                error: error.clone(),
            });
        }
        if let Some(e) = error {
            self.errors += 1;
            self.last_error = Some(e);
        } else {
            self.timeouts += 1;
        }
    }

    pub fn answered(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// Answers per second over the elapsed time.
    pub fn throughput(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.answered() as f64 / secs
        } else {
            0.0
        }
    }
}

/// Runs `plan`, with one sender per connection made by `make_sender`.
pub async fn run<S: Sender>(plan: &Plan, make_sender: impl FnMut(usize) -> S) -> Results {
    let (_keep, stop) = tokio::sync::watch::channel(false);
    run_until(plan, make_sender, stop).await
}

/// [`run`], ending early once `stop` turns true: nothing new is sent, answers still due are
/// waited for (each within the timeout), so the counts cover every request sent.
pub async fn run_until<S: Sender>(
    plan: &Plan,
    mut make_sender: impl FnMut(usize) -> S,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Results {
    let start = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..plan.connections {
        let sender = make_sender(c);
        let stop = stop.clone();
        tasks.spawn(connection(sender, plan.clone(), start, next.clone(), stop));
    }
    let mut total = Results::new();
    while let Some(res) = tasks.join_next().await {
        if let Ok(r) = res {
            total.merge(r);
        }
    }
    if plan.model == Model::Closed {
        total.elapsed = plan.duration;
    }
    total
}

/// Resolves once `stop` is true; never if its sender is gone without saying so.
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn connection<S: Sender>(
    mut sender: S,
    plan: Plan,
    start: Instant,
    next: Arc<AtomicU64>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Results {
    let mut r = Results::new();
    let end = start + plan.duration;
    let drain_deadline = end + plan.timeout;
    loop {
        if *stop.borrow() {
            break;
        }
        let (due, limit) = match plan.model {
            Model::Open { rate } => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                if due >= end {
                    break;
                }
                if Instant::now() > drain_deadline {
                    r.unsent += 1;
                    continue;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => {}
                    _ = stopped(&mut stop) => break,
                }
                (due, plan.timeout)
            }
            Model::Closed => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                (now, plan.timeout.min(end - now))
            }
        };
        let (sent, sent_wall) = (Instant::now(), std::time::SystemTime::now());
        let outcome = tokio::time::timeout(limit, sender.send()).await;
        let done = Instant::now();
        match outcome {
            Ok(Ok(status)) => {
                let us = (done - due).as_micros().max(1) as u64;
                let _ = r.latency_us.record(us.min(r.latency_us.high()));
                *r.statuses.entry(status).or_default() += 1;
                r.elapsed = r.elapsed.max(done - start);
            }
            Ok(Err(e)) => r.failed(&sender, sent_wall, sent - start, Some(e)),
            Err(_) if plan.model == Model::Closed && done >= end => r.abandoned += 1,
            Err(_) => r.failed(&sender, sent_wall, sent - start, None),
        }
    }
    r.connections_opened = sender.connections_opened();
    r
}

#[cfg(test)]
mod tests;
