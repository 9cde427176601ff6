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
        let outcome = tokio::time::timeout(limit, sender.send()).await;
        let done = Instant::now();
        match outcome {
            Ok(Ok(status)) => {
                let us = (done - due).as_micros().max(1) as u64;
                let _ = r.latency_us.record(us.min(r.latency_us.high()));
                *r.statuses.entry(status).or_default() += 1;
                r.elapsed = r.elapsed.max(done - start);
            }
            Ok(Err(e)) => {
                r.errors += 1;
                r.last_error = Some(e);
            }
            Err(_) if plan.model == Model::Closed && done >= end => r.abandoned += 1,
            Err(_) => r.timeouts += 1,
        }
    }
    r.connections_opened = sender.connections_opened();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_the_run_early_and_counts_what_was_sent() {
        let plan = Plan {
            model: Model::Open { rate: 10.0 },
            duration: Duration::from_secs(60),
            connections: 4,
            timeout: Duration::from_secs(5),
            max_connection_age: None,
        };
        let (tx, rx) = tokio::sync::watch::channel(false);
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2050)).await;
            let _ = tx.send(true);
        });
        let r = run_until(&plan, |_| Fixed(Duration::from_millis(100)), rx).await;
        let _ = stopper.await;
        // Due at 0, 0.1, …, 2.0 s: 21 sent and answered, nothing after the stop.
        assert_eq!(
            (r.answered(), r.errors, r.timeouts, r.unsent),
            (21, 0, 0, 0)
        );
    }

    /// A server that takes a fixed time per request and can serve one at a time per
    /// connection.
    struct Fixed(Duration);

    impl Sender for Fixed {
        fn send(&mut self) -> SendFuture<'_> {
            let d = self.0;
            Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(200)
            })
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 100 req/s for 1 s on one connection to a 100 ms server: request i is due at 10·i ms
    /// but sent at 100·i ms, so its latency is 100 ms + 90·i ms. Measuring from the send time
    /// would report a flat 100 ms and hide the queue.
    #[tokio::test(start_paused = true)]
    async fn open_model_measures_from_the_due_time() {
        let plan = Plan {
            model: Model::Open { rate: 100.0 },
            duration: ms(1000),
            connections: 1,
            timeout: ms(60_000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Fixed(ms(100))).await;
        assert_eq!(r.answered(), 100);
        assert_eq!((r.errors, r.timeouts, r.unsent), (0, 0, 0));
        let max_ms = r.latency_us.max() as f64 / 1000.0;
        assert!((max_ms - 9010.0).abs() < 20.0, "max {max_ms}");
        let min_ms = r.latency_us.min() as f64 / 1000.0;
        assert!((min_ms - 100.0).abs() < 2.0, "min {min_ms}");
        let p50_ms = r.latency_us.value_at_quantile(0.5) as f64 / 1000.0;
        assert!((4400.0..4600.0).contains(&p50_ms), "p50 {p50_ms}");
        // 100 answers over 10 s of service: the server's real capacity.
        assert!((r.throughput() - 10.0).abs() < 0.1, "{}", r.throughput());
    }

    /// Enough connections: every request leaves on time and sees only the service time.
    #[tokio::test(start_paused = true)]
    async fn open_model_on_time_with_enough_connections() {
        let plan = Plan {
            model: Model::Open { rate: 100.0 },
            duration: ms(1000),
            connections: 20,
            timeout: ms(60_000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Fixed(ms(100))).await;
        assert_eq!(r.answered(), 100);
        assert!(r.latency_us.max() < 102_000, "{}", r.latency_us.max());
    }

    /// Requests that cannot be sent before end + timeout are counted, not forgotten.
    #[tokio::test(start_paused = true)]
    async fn open_model_counts_unsent_requests() {
        let plan = Plan {
            model: Model::Open { rate: 100.0 },
            duration: ms(1000),
            connections: 1,
            timeout: ms(1000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Fixed(ms(100))).await;
        assert_eq!(r.answered() + r.unsent, 100);
        assert!(r.unsent >= 75, "{}", r.unsent);
    }

    /// Closed model: back-to-back on each connection; throughput is connections / service
    /// time, and the answer outstanding at the end is abandoned.
    #[tokio::test(start_paused = true)]
    async fn closed_model_is_back_to_back() {
        let plan = Plan {
            model: Model::Closed,
            duration: ms(1050),
            connections: 4,
            timeout: ms(10_000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Fixed(ms(100))).await;
        assert_eq!(r.answered(), 40);
        assert_eq!(r.abandoned, 4);
        assert_eq!(r.timeouts, 0);
        assert!((r.throughput() - 40.0 / 1.05).abs() < 0.1);
        assert!(r.latency_us.max() < 101_000);
    }

    struct Failing;
    impl Sender for Failing {
        fn send(&mut self) -> SendFuture<'_> {
            Box::pin(async { Err("connection refused".to_string()) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn errors_are_counted_with_the_last_message() {
        let plan = Plan {
            model: Model::Open { rate: 10.0 },
            duration: ms(1000),
            connections: 2,
            timeout: ms(1000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Failing).await;
        assert_eq!((r.errors, r.answered()), (10, 0));
        assert_eq!(r.last_error.as_deref(), Some("connection refused"));
    }

    /// Takes 100 ms per request and opens a "connection" before every third one, as a sender
    /// with a 300 ms age limit would.
    struct Rotating {
        sent: u64,
        opened: u64,
    }

    impl Sender for Rotating {
        fn send(&mut self) -> SendFuture<'_> {
            if self.sent.is_multiple_of(3) {
                self.opened += 1;
            }
            self.sent += 1;
            Box::pin(async {
                tokio::time::sleep(ms(100)).await;
                Ok(200)
            })
        }

        fn connections_opened(&self) -> u64 {
            self.opened
        }
    }

    #[tokio::test(start_paused = true)]
    async fn connections_opened_are_summed_over_connections() {
        let plan = Plan {
            model: Model::Closed,
            duration: ms(1050),
            connections: 2,
            timeout: ms(10_000),
            max_connection_age: None,
        };
        let r = run(&plan, |_| Rotating { sent: 0, opened: 0 }).await;
        // Each connection sends 11 times (the last is abandoned), opening before sends
        // 0, 3, 6 and 9.
        assert_eq!((r.answered(), r.abandoned), (20, 2));
        assert_eq!(r.connections_opened, 8);
    }
}
