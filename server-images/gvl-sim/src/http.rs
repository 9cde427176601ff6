//! Request routing and responses shared by both server modes.

use crate::config::WorkSpec;
use crate::gvl::GvlTimes;
use crate::work::with_overrides;
use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;

pub type Body = Full<Bytes>;

#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// `GET /` (configured work) or a seed 000 pattern (`/a`, `/b`, `/c`), with query overrides.
    Work(WorkSpec),
    Metrics,
    Health,
    BadRequest(String),
    NotFound,
    MethodNotAllowed,
}

/// Seed 000's endpoint shapes, with the Ruby reference app's numbers: `/a` a quick DB access,
/// `/b` `sleep(0.5)`, `/c` five short queries and two sequential 300 ms HTTP calls.
pub fn pattern(path: &str, base: &WorkSpec) -> Option<WorkSpec> {
    let (cpu_ms, io_ms, io_calls, db_ms, db_calls) = match path {
        "/a" => (0.5, 0.0, 1, 2.0, 1),
        "/b" => (0.0, 500.0, 1, 0.0, 0),
        "/c" => (1.0, 600.0, 2, 2.0, 5),
        _ => return None,
    };
    Some(WorkSpec {
        cpu_ms,
        io_ms,
        io_calls,
        db_ms,
        db_calls,
        ..base.clone()
    })
}

pub fn route(method: &Method, path: &str, query: Option<&str>, base: &WorkSpec) -> Route {
    let preset = pattern(path, base);
    let known = preset.is_some() || matches!(path, "/" | "/metrics" | "/healthz");
    if !known {
        return Route::NotFound;
    }
    if method != Method::GET && method != Method::HEAD {
        return Route::MethodNotAllowed;
    }
    match path {
        "/metrics" => Route::Metrics,
        "/healthz" => Route::Health,
        _ => match with_overrides(preset.as_ref().unwrap_or(base), query) {
            Ok(spec) => Route::Work(spec),
            Err(e) => Route::BadRequest(e.to_string()),
        },
    }
}

pub fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

/// Responses for everything but `Work`.
pub fn simple(route: &Route, metrics_text: impl FnOnce() -> String) -> Response<Body> {
    match route {
        Route::Metrics => text(StatusCode::OK, crate::metrics::CONTENT_TYPE, metrics_text()),
        Route::Health => text(StatusCode::OK, "text/plain", "ok\n".into()),
        Route::BadRequest(msg) => text(StatusCode::BAD_REQUEST, "text/plain", format!("{msg}\n")),
        Route::NotFound => text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        Route::MethodNotAllowed | Route::Work(_) => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n".into(),
        ),
    }
}

/// The JSON body of a work response: where this request's time went.
pub fn work_body(server: &str, worker: usize, status: StatusCode, t: &GvlTimes) -> String {
    serde_json::json!({
        "server": server,
        "worker": worker,
        "status": status.as_u16(),
        "gvl_wait_ms": t.gvl_wait.as_secs_f64() * 1000.0,
        "io_wait_ms": t.io_wait.as_secs_f64() * 1000.0,
        "running_ms": t.running.as_secs_f64() * 1000.0,
    })
    .to_string()
}

/// A worker's share of the listening socket on its own runtime; `None` (logged) if it cannot.
pub fn listen(worker: usize, listener: std::net::TcpListener) -> Option<tokio::net::TcpListener> {
    tokio::net::TcpListener::from_std(listener)
        .map_err(|e| eprintln!("gvl-sim: worker {worker}: cannot listen: {e}"))
        .ok()
}

/// The next connection; an accept error (e.g. out of file descriptors under overload) is
/// logged and retried after a short pause rather than ending the worker.
pub async fn accept(worker: usize, listener: &tokio::net::TcpListener) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return stream;
            }
            Err(e) => {
                eprintln!("gvl-sim: worker {worker}: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> WorkSpec {
        WorkSpec {
            cpu_ms: 1.0,
            io_ms: 2.0,
            io_calls: 1,
            db_ms: 0.0,
            db_calls: 0,
            jitter: 0.0,
            cpu_clock: crate::config::CpuClock::Thread,
        }
    }

    #[test]
    fn routes() {
        let b = base();
        assert_eq!(route(&Method::GET, "/", None, &b), Route::Work(b.clone()));
        assert_eq!(route(&Method::GET, "/metrics", None, &b), Route::Metrics);
        assert_eq!(route(&Method::GET, "/healthz", None, &b), Route::Health);
        assert_eq!(route(&Method::GET, "/nope", None, &b), Route::NotFound);
        let Route::Work(c) = route(&Method::GET, "/c", Some("io_ms=60"), &b) else {
            panic!("/c is a work route");
        };
        assert_eq!(
            (c.cpu_ms, c.io_ms, c.io_calls, c.db_ms, c.db_calls),
            (1.0, 60.0, 2, 2.0, 5)
        );
        let Route::Work(b500) = route(&Method::GET, "/b", None, &b) else {
            panic!("/b is a work route");
        };
        assert_eq!((b500.cpu_ms, b500.io_ms, b500.db_calls), (0.0, 500.0, 0));
        assert_eq!(route(&Method::POST, "/", None, &b), Route::MethodNotAllowed);
        assert!(matches!(
            route(&Method::GET, "/", Some("io_ms=-1"), &b),
            Route::BadRequest(m) if m.contains("io_ms")
        ));
    }
}
