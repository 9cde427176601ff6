//! The HTTP handlers of both modes on a real server bound to 127.0.0.1:0, and the load
//! generator against it. Assertions are on counts and lower bounds, never on timing.

use gvl_sim::config::ServeConfig;
use gvl_sim::server::start;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};

fn serve(vars: &[(&'static str, &str)]) -> SocketAddr {
    let mut map: HashMap<&'static str, String> =
        vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
    map.insert("PORT", "0".into());
    let config = ServeConfig::from_lookup(&|v| Ok(map.get(v).cloned())).unwrap();
    start(config, IpAddr::from([127, 0, 0, 1])).unwrap().addr
}

/// One request on its own connection: (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{name} missing in\n{text}"))
        .parse()
        .unwrap()
}

fn endpoints_work(server: &str) {
    let addr = serve(&[
        ("SERVER", server),
        ("CPU_MS", "2"),
        ("IO_MS", "20"),
        ("IO_CALLS", "2"),
    ]);
    let (status, body) = get(addr, "/");
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["server"], server);
    assert!(json["io_wait_ms"].as_f64().unwrap() >= 20.0, "{json}");
    assert!(json["running_ms"].as_f64().unwrap() >= 2.0, "{json}");

    let (status, _) = get(addr, "/?io_ms=30&cpu_ms=0");
    assert_eq!(status, 200);
    // Seed 000 pattern A: one 2 ms DB wait and 0.5 ms CPU.
    let (status, body) = get(addr, "/a");
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(json["io_wait_ms"].as_f64().unwrap() >= 2.0, "{json}");
    let (status, body) = get(addr, "/?io_ms=-5");
    assert_eq!(status, 400);
    assert!(body.contains("io_ms"), "{body}");
    assert_eq!(get(addr, "/healthz"), (200, "ok\n".into()));
    assert_eq!(get(addr, "/missing").0, 404);

    let (status, text) = get(addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(metric(&text, "rails_requests_total{status=\"200\"}"), 3.0);
    assert_eq!(metric(&text, "rails_request_duration_seconds_count"), 3.0);
    assert!(metric(&text, "ruby_io_wait_seconds_total") >= 0.05);
    assert!(metric(&text, "ruby_running_seconds_total") >= 0.002);
    assert!(metric(&text, "ruby_gvl_wait_seconds_total") >= 0.0);
    assert!(metric(&text, "process_resident_memory_bytes") > 0.0);
}

#[test]
fn puma_endpoints() {
    endpoints_work("puma");
}

#[test]
fn falcon_endpoints() {
    endpoints_work("falcon");
}

#[test]
fn error_rate_one_fails_every_request() {
    for server in ["puma", "falcon"] {
        let addr = serve(&[("SERVER", server), ("IO_MS", "1"), ("ERROR_RATE", "1")]);
        assert_eq!(get(addr, "/").0, 500);
        assert_eq!(get(addr, "/").0, 500);
        let text = get(addr, "/metrics").1;
        assert_eq!(metric(&text, "rails_requests_total{status=\"500\"}"), 2.0);
    }
}

#[test]
fn injected_latency_adds_to_io_wait() {
    let addr = serve(&[("CPU_MS", "0"), ("IO_MS", "0"), ("EXTRA_LATENCY_MS", "40")]);
    let json: serde_json::Value = serde_json::from_str(&get(addr, "/").1).unwrap();
    assert!(json["io_wait_ms"].as_f64().unwrap() >= 40.0, "{json}");
}

#[test]
fn metrics_aggregate_over_workers() {
    let addr = serve(&[
        ("WEB_CONCURRENCY", "3"),
        ("RAILS_MAX_THREADS", "2"),
        ("IO_MS", "1"),
    ]);
    let handles: Vec<_> = (0..9)
        .map(|_| std::thread::spawn(move || get(addr, "/").0))
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    let text = get(addr, "/metrics").1;
    assert_eq!(metric(&text, "rails_requests_total{status=\"200\"}"), 9.0);
    for w in 0..3 {
        assert_eq!(
            metric(&text, &format!("puma_backlog{{worker=\"{w}\"}}")),
            0.0
        );
        assert_eq!(
            metric(&text, &format!("puma_running{{worker=\"{w}\"}}")),
            0.0
        );
        assert_eq!(
            metric(&text, &format!("puma_pool_capacity{{worker=\"{w}\"}}")),
            2.0
        );
        assert_eq!(
            metric(&text, &format!("puma_max_threads{{worker=\"{w}\"}}")),
            2.0
        );
    }
}

#[test]
fn metrics_port_serves_the_same_counters() {
    let mut map: HashMap<&'static str, String> = HashMap::new();
    map.insert("PORT", "0".into());
    map.insert("IO_MS", "1".into());
    // A free port for METRICS_PORT (0 means off there).
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    map.insert("METRICS_PORT", free.to_string());
    let config = ServeConfig::from_lookup(&|v| Ok(map.get(v).cloned())).unwrap();
    let running = start(config, IpAddr::from([127, 0, 0, 1])).unwrap();
    let metrics_addr = running.metrics_addr.unwrap();
    assert_eq!(get(running.addr, "/").0, 200);
    let text = get(metrics_addr, "/metrics").1;
    assert_eq!(metric(&text, "rails_requests_total{status=\"200\"}"), 1.0);
    assert_eq!(get(metrics_addr, "/healthz").0, 200);
    assert_eq!(get(metrics_addr, "/").0, 404);
}

#[test]
fn memory_grows_per_request() {
    let addr = serve(&[
        ("IO_MS", "0"),
        ("CPU_MS", "0"),
        ("MEMORY_GROWTH_KB_PER_REQUEST", "16384"),
    ]);
    let before = metric(&get(addr, "/metrics").1, "process_resident_memory_bytes");
    for _ in 0..3 {
        assert_eq!(get(addr, "/").0, 200);
    }
    let after = metric(&get(addr, "/metrics").1, "process_resident_memory_bytes");
    assert!(
        after - before >= 40.0 * 1024.0 * 1024.0,
        "{before} -> {after}"
    );
}

#[tokio::test]
async fn load_generator_against_a_real_server() {
    let addr = serve(&[("SERVER", "falcon"), ("CPU_MS", "0"), ("IO_MS", "5")]);
    let args = gvl_sim::load::LoadArgs {
        url: format!("http://{addr}/?io_ms=2"),
        rate: Some(40.0),
        closed: false,
        duration: std::time::Duration::from_millis(500),
        connections: 4,
        timeout: std::time::Duration::from_secs(10),
        max_connection_age: None,
        allow_cidr: vec![],
        json: false,
        no_request_start: false,
        alb_trace_id: false,
        control_port: None,
    };
    let s = gvl_sim::load::run(&args).await.unwrap();
    // Due times i/40 s for i < 20: exactly 20 requests, all answered.
    assert_eq!(s.answered, 20, "{s:?}");
    assert_eq!(s.statuses["200"], 20);
    assert_eq!((s.errors, s.timeouts, s.unsent), (0, 0, 0));
    assert!(s.latency_ms["p50"] >= 2.0, "{s:?}");
    let text = get(addr, "/metrics").1;
    assert_eq!(metric(&text, "rails_requests_total{status=\"200\"}"), 20.0);
}
