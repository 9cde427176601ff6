//! Request queue time end to end on 127.0.0.1: the load generator stamps `X-Request-Start`,
//! a Puma-like server with one thread records how long each request waited for it. Above
//! capacity the queue grows and so does the recorded wait; below capacity it stays near zero.
//! Behavioural assertions with wide margins, not timing checks.

use gvl_sim::config::ServeConfig;
use gvl_sim::load::{run, LoadArgs};
use gvl_sim::server::start;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// Puma, 1 worker × 1 thread, 60 ms of I/O per request: capacity ~16 req/s.
fn one_thread_server() -> SocketAddr {
    let map: HashMap<&str, String> = [
        ("PORT", "0"),
        ("SERVER", "puma"),
        ("WEB_CONCURRENCY", "1"),
        ("RAILS_MAX_THREADS", "1"),
        ("CPU_MS", "0"),
        ("IO_MS", "60"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    let config = ServeConfig::from_lookup(&|v| Ok(map.get(v).cloned())).unwrap();
    start(config, IpAddr::from([127, 0, 0, 1])).unwrap().addr
}

fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{name} missing in\n{text}"))
        .parse()
        .unwrap()
}

/// (count, sum in seconds) of the queue-time histogram.
fn queue_time(addr: SocketAddr) -> (f64, f64) {
    let text = scrape(addr);
    (
        metric(&text, "rails_request_queue_time_seconds_count"),
        metric(&text, "rails_request_queue_time_seconds_sum"),
    )
}

/// Open-model load for `secs`; enough connections that no request waits in the client, so
/// every wait happens at the server, where a load balancer's requests would wait too.
async fn load(addr: SocketAddr, rate: f64, secs: f64, request_start: bool) -> u64 {
    let args = LoadArgs {
        url: format!("http://{addr}/"),
        rate: Some(rate),
        closed: false,
        duration: Duration::from_secs_f64(secs),
        connections: 64,
        timeout: Duration::from_secs(10),
        max_connection_age: None,
        allow_cidr: vec![],
        json: false,
        no_request_start: !request_start,
        alb_trace_id: false,
        control_port: None,
    };
    let s = run(&args).await.unwrap();
    assert_eq!((s.errors, s.timeouts, s.unsent), (0, 0, 0), "{s:?}");
    s.answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_capacity_requests_queue_for_the_thread() {
    let addr = one_thread_server();
    // 30 req/s for 2 s against ~16 req/s: request i waits about i × 27 ms, ~0.8 s on average.
    let answered = load(addr, 30.0, 2.0, true).await;
    let (count, sum) = queue_time(addr);
    let mean = sum / count;
    eprintln!("30 req/s: {answered} answered, queue time count {count}, mean {mean:.3} s");
    assert_eq!(count, answered as f64);
    assert!(mean > 0.1, "mean queue time {mean} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_capacity_requests_do_not_queue() {
    let addr = one_thread_server();
    let answered = load(addr, 5.0, 2.0, true).await;
    let (count, sum) = queue_time(addr);
    let mean = sum / count;
    eprintln!("5 req/s: {answered} answered, queue time count {count}, mean {mean:.4} s");
    assert_eq!(count, answered as f64);
    assert!(mean < 0.02, "mean queue time {mean} s");

    // Without the header nothing is recorded.
    let more = load(addr, 5.0, 1.0, false).await;
    assert!(more > 0);
    assert_eq!(queue_time(addr), (count, sum));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_trace_ids_give_queue_times_of_the_arrivals_fraction_of_a_second() {
    // Below capacity, so the real queue time is ~0: what is recorded is how far into its
    // second each request arrived, spread over 0–1 s (mean ~0.5 s).
    let addr = one_thread_server();
    let args = LoadArgs {
        url: format!("http://{addr}/"),
        rate: Some(10.0),
        closed: false,
        duration: Duration::from_secs(4),
        connections: 64,
        timeout: Duration::from_secs(10),
        max_connection_age: None,
        allow_cidr: vec![],
        json: false,
        no_request_start: false,
        alb_trace_id: true,
        control_port: None,
    };
    let s = run(&args).await.unwrap();
    assert_eq!((s.errors, s.timeouts, s.unsent), (0, 0, 0), "{s:?}");
    let (count, sum) = queue_time(addr);
    let mean = sum / count;
    eprintln!("ALB trace ids: {count} requests, mean queue time {mean:.3} s");
    assert_eq!(count, s.answered as f64);
    assert!((0.25..0.75).contains(&mean), "mean queue time {mean} s");
}
