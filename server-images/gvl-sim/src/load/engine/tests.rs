//! The load loops on tokio's paused clock.

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
    // Each kept in the order sent, with its own message.
    assert_eq!(r.failures.len(), 10);
    let after: Vec<f64> = r.failures.iter().map(|f| f.after_s).collect();
    assert_eq!(
        after,
        (0..10).map(|i| f64::from(i) / 10.0).collect::<Vec<_>>()
    );
    assert!(r
        .failures
        .iter()
        .all(|f| f.kind == "error" && f.error.as_deref() == Some("connection refused")));
}

/// Never answers; says where it waits.
struct Stalling;
impl Sender for Stalling {
    fn send(&mut self) -> SendFuture<'_> {
        Box::pin(std::future::pending())
    }

    fn state(&self) -> String {
        "response, on a connection 1.0 s old".into()
    }
}

#[tokio::test(start_paused = true)]
async fn timeouts_keep_where_they_waited_and_at_most_the_first_few() {
    let plan = Plan {
        model: Model::Open { rate: 100.0 },
        duration: ms(1000),
        connections: 200,
        timeout: ms(500),
        max_connection_age: None,
    };
    let r = run(&plan, |_| Stalling).await;
    assert_eq!((r.timeouts, r.answered()), (100, 0));
    assert_eq!(r.failures.len(), KEPT_FAILURES);
    // The first ones sent, in order.
    assert_eq!(r.failures[0].after_s, 0.0);
    assert!(r
        .failures
        .windows(2)
        .all(|w| w[0].sent_unix_ms <= w[1].sent_unix_ms));
    let f = &r.failures[KEPT_FAILURES - 1];
    assert_eq!((f.kind, f.error.as_deref()), ("timeout", None));
    assert_eq!(f.state, "response, on a connection 1.0 s old");
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
