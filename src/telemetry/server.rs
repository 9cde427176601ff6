//! The operator's HTTP endpoint: `/metrics`, `/healthz`, `/readyz`.
//!
//! `/healthz` only says the process is alive and serving; `/readyz` waits for the controller
//! to report its caches synced, so a rolling update does not count a replica as ready before
//! it could act.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
/// Open connections get this long to finish after shutdown is requested.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// A client that does not send its request headers within this time is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Shared flag the controller sets once its caches are synced (and may clear again).
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen for metrics/health on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl ServerError {
    pub fn category(&self) -> &'static str {
        match self {
            ServerError::Bind { .. } => "TelemetryBind",
        }
    }
}

/// A running telemetry server; it stops when the shutdown token is cancelled.
pub struct TelemetryServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TelemetryServer {
    /// Binds `addr` (port 0 picks a free port) and serves in a background task until
    /// `shutdown` is cancelled.
    pub async fn bind(
        addr: SocketAddr,
        metrics: Metrics,
        readiness: Readiness,
        shutdown: CancellationToken,
    ) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        tracing::info!(%local_addr, "telemetry server listening");
        let task = tokio::spawn(serve(listener, metrics, readiness, shutdown));
        Ok(Self { local_addr, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Resolves once the server has stopped accepting and drained its connections.
    pub async fn wait(self) {
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "telemetry server task failed");
        }
    }
}

async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, _peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    // Usually out of file descriptors; back off instead of spinning.
                    tracing::warn!(error = %err, "telemetry server accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let metrics = metrics.clone();
        let readiness = readiness.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let response = respond(req.method(), req.uri().path(), &metrics, &readiness);
            async move { Ok::<_, Infallible>(response) }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "telemetry connection ended with an error");
            }
        });
    }
    // Stop accepting before draining so the port is free for a successor at once.
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("telemetry server stopped"),
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!(timeout = ?DRAIN_TIMEOUT, "telemetry connections still open at shutdown; dropping them");
        }
    }
}

/// The routing table, separate from the connection handling.
fn respond(
    method: &Method,
    path: &str,
    metrics: &Metrics,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    let known = matches!(path, "/metrics" | "/healthz" | "/readyz");
    if !known {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    if method != Method::GET && method != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match path {
        "/metrics" => {
            let mut response = Response::new(Full::new(Bytes::from(metrics.encode())));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            response
        }
        "/healthz" => plain(StatusCode::OK, "ok\n"),
        _ if readiness.is_ready() => plain(StatusCode::OK, "ready\n"),
        _ => plain(StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n"),
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

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
}
