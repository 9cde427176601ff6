use crate::telemetry::http::*;
use crate::telemetry::Metrics;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// One HTTP/1.1 request over a fresh connection; returns (status, headers+body text).
async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {out:?}"));
    (status, out)
}

async fn start() -> (TelemetryServer, Metrics, Readiness, CancellationToken) {
    let metrics = Metrics::new();
    let readiness = Readiness::new();
    let shutdown = CancellationToken::new();
    let server = TelemetryServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        metrics.clone(),
        readiness.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    (server, metrics, readiness, shutdown)
}

#[tokio::test]
async fn endpoints_answer_and_readiness_follows_the_flag() {
    let (server, metrics, readiness, shutdown) = start().await;
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    assert_eq!(request(addr, "GET", "/healthz").await.0, 200);
    let (status, body) = request(addr, "GET", "/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("caches not synced"));

    readiness.set_ready(true);
    assert_eq!(request(addr, "GET", "/readyz").await.0, 200);
    readiness.set_ready(false);
    assert_eq!(request(addr, "GET", "/readyz").await.0, 503);

    metrics.record_promotion();
    metrics.set_leader(true);
    let (status, body) = request(addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.contains("application/openmetrics-text"), "{body}");
    assert!(body.contains("concurrency_promotions_total 1"), "{body}");
    assert!(body.contains("concurrency_leader 1"), "{body}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");

    assert_eq!(request(addr, "GET", "/nope").await.0, 404);
    assert_eq!(request(addr, "GET", "/").await.0, 404);
    let (status, body) = request(addr, "POST", "/metrics").await;
    assert_eq!(status, 405);
    assert!(
        body.to_ascii_lowercase().contains("allow: get, head"),
        "{body}"
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(3), server.wait())
        .await
        .expect("server stops after cancel");
}

#[tokio::test]
async fn shutdown_closes_idle_keepalive_connections_and_the_port() {
    let (server, _metrics, _readiness, shutdown) = start().await;
    let addr = server.local_addr();

    // A keep-alive client that made one request and stays connected.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    shutdown.cancel();
    // Well under DRAIN_TIMEOUT: graceful shutdown closes idle connections at once.
    tokio::time::timeout(Duration::from_secs(2), server.wait())
        .await
        .expect("graceful shutdown does not wait for idle clients");
    let n = idle.read(&mut buf).await.unwrap();
    assert_eq!(n, 0, "server closed the idle connection");
    assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
}

#[tokio::test]
async fn bind_error_names_the_address() {
    let (server, metrics, readiness, shutdown) = start().await;
    let taken = server.local_addr();
    let err = match TelemetryServer::bind(taken, metrics, readiness, shutdown.clone()).await {
        Ok(_) => panic!("second bind on {taken} succeeded"),
        Err(err) => err,
    };
    assert_eq!(err.category(), "TelemetryBind");
    assert!(err.to_string().contains(&taken.to_string()), "{err}");
    shutdown.cancel();
    server.wait().await;
}
