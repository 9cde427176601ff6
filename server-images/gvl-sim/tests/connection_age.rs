//! `gvl-sim load --max-connection-age` against a counting HTTP server on 127.0.0.1: with the
//! flag the load really opens new connections (as kube-proxy needs to reach new pods), without
//! it the connections stay put. Assertions are on counts and logical bounds, not on timing.

use bytes::Bytes;
use gvl_sim::load::{run, LoadArgs};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    closed: AtomicU64,
    /// Connections that ended in an error, e.g. a request cut off half-way.
    broken: AtomicU64,
    requests: AtomicU64,
}

/// Answers every request with 200 at once, counting connections and requests.
async fn counting_server() -> (SocketAddr, Arc<Counts>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.accepted.fetch_add(1, SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let per_request = c.clone();
                let svc = service_fn(move |_req| {
                    per_request.requests.fetch_add(1, SeqCst);
                    async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("ok"))))
                    }
                });
                let served = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                if served.is_err() {
                    c.broken.fetch_add(1, SeqCst);
                }
                c.closed.fetch_add(1, SeqCst);
            });
        }
    });
    (addr, counts)
}

/// 100 req/s over 2 connections for 1.5 s; returns the summary, the server's counts once
/// every connection has closed, and the wall time of the run.
async fn load(max_age: Option<Duration>) -> (gvl_sim::load::report::Summary, Arc<Counts>, f64) {
    let (addr, counts) = counting_server().await;
    let args = LoadArgs {
        url: format!("http://{addr}/"),
        rate: Some(100.0),
        closed: false,
        duration: Duration::from_millis(1500),
        connections: 2,
        timeout: Duration::from_secs(10),
        max_connection_age: max_age,
        allow_cidr: vec![],
        json: false,
        no_request_start: false,
        alb_trace_id: false,
        control_port: None,
    };
    let started = Instant::now();
    let s = run(&args).await.unwrap();
    let wall = started.elapsed().as_secs_f64();
    // The last connections close as the load's tasks end; wait (bounded) for the server to
    // see every close, so `broken` is complete.
    let deadline = Instant::now() + Duration::from_secs(5);
    while counts.closed.load(SeqCst) < counts.accepted.load(SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (s, counts, wall)
}

#[tokio::test]
async fn connections_rotate_at_the_max_age() {
    let (s, counts, wall) = load(Some(Duration::from_millis(200))).await;
    let accepted = counts.accepted.load(SeqCst);
    eprintln!(
        "max age 200ms: server accepted {accepted}, report says opened {}, answered {}, {wall:.2} s",
        s.connections_opened, s.answered
    );
    // Due times i/100 s for i < 150: all answered, none lost to a reconnect.
    assert_eq!(s.answered, 150, "{s:?}");
    assert_eq!((s.errors, s.timeouts, s.unsent), (0, 0, 0), "{s:?}");
    assert_eq!(counts.requests.load(SeqCst), 150);
    // Kept connections would be 2; ~1.5 s / 0.2 s per connection gives ~16.
    assert!(accepted >= 6, "only {accepted} connections accepted");
    // A connection is replaced only after 0.9 × 200 ms (the jitter's floor), so each of the
    // two chains opens at most 1 + wall / 0.18 s connections: the age is honoured, not
    // "reconnect every request".
    let most = 2 * (1 + (wall / 0.18) as u64);
    assert!(
        accepted <= most,
        "{accepted} connections in {wall:.2} s (at most {most})"
    );
    assert_eq!(s.connections_opened, accepted);
    assert_eq!(s.max_connection_age_s, Some(0.2));
    // Every connection was closed between requests, none with a request cut off.
    assert_eq!(counts.closed.load(SeqCst), accepted);
    assert_eq!(counts.broken.load(SeqCst), 0);
}

#[tokio::test]
async fn without_the_flag_connections_are_kept() {
    let (s, counts, wall) = load(None).await;
    let accepted = counts.accepted.load(SeqCst);
    eprintln!(
        "no max age: server accepted {accepted}, report says opened {}, answered {}, {wall:.2} s",
        s.connections_opened, s.answered
    );
    assert_eq!(s.answered, 150, "{s:?}");
    assert_eq!(accepted, 2);
    assert_eq!(s.connections_opened, 2);
    assert_eq!(s.max_connection_age_s, None);
    assert_eq!(counts.broken.load(SeqCst), 0);
}
