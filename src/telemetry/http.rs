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
pub enum HttpServerError {
    #[error("cannot listen for metrics/health on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl HttpServerError {
    pub fn category(&self) -> &'static str {
        match self {
            HttpServerError::Bind { .. } => "TelemetryBind",
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
    ) -> Result<Self, HttpServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpServerError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| HttpServerError::Bind { addr, source })?;
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
