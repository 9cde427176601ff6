//! `gvl-sim receive`: a webhook receiver for the e2e suite. It answers every `POST` with 200
//! and keeps it (path, headers, raw body); `GET /received` returns what it kept as JSON, in
//! arrival order. `FAIL_FIRST=N` answers the first N posts to each path with 503, to exercise
//! a sender's retries. Bounded: at most `MAX_KEPT` requests of at most `MAX_BODY` bytes each.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde::Serialize;
use tokio::net::TcpListener;

pub const MAX_KEPT: usize = 1000;
pub const MAX_BODY: usize = 256 * 1024;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Received {
    pub path: String,
    /// Lowercased names; a repeated header keeps its last value.
    pub headers: BTreeMap<String, String>,
    /// The body as sent (a receiver verifies a signature over these bytes).
    pub body: String,
    /// The HTTP status it was answered with.
    pub status: u16,
}

#[derive(Default)]
pub struct Receiver {
    kept: Mutex<Vec<Received>>,
    fail_first: usize,
    posts: Mutex<BTreeMap<String, usize>>,
}

impl Receiver {
    pub fn new(fail_first: usize) -> Self {
        Receiver {
            fail_first,
            ..Receiver::default()
        }
    }

    /// The answer to one request, keeping it if it is a post.
    pub fn handle(
        &self,
        method: &Method,
        path: &str,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> (StatusCode, String) {
        match (method, path) {
            (&Method::GET, "/received") => {
                let kept = self.kept.lock().clone();
                match serde_json::to_string(&kept) {
                    Ok(json) => (StatusCode::OK, json),
                    Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                }
            }
            (&Method::GET, "/healthz") => (StatusCode::OK, "ok\n".into()),
            (&Method::POST, _) => {
                let n = {
                    let mut posts = self.posts.lock();
                    let n = posts.entry(path.to_string()).or_insert(0);
                    *n += 1;
                    *n
                };
                let status = if n <= self.fail_first {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::OK
                };
                let mut kept = self.kept.lock();
                if kept.len() < MAX_KEPT {
                    kept.push(Received {
                        path: path.to_string(),
                        headers: headers
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.as_str().to_string(),
                                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                                )
                            })
                            .collect(),
                        body: String::from_utf8_lossy(body).into_owned(),
                        status: status.as_u16(),
                    });
                }
                (status, "received\n".into())
            }
            _ => (
                StatusCode::NOT_FOUND,
                "POST anything; GET /received\n".into(),
            ),
        }
    }
}

async fn serve_one(
    receiver: Arc<Receiver>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"body too large or cut\n")));
            *r.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            return Ok(r);
        }
    };
    let (status, text) = receiver.handle(&parts.method, parts.uri.path(), &parts.headers, &bytes);
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    Ok(r)
}

/// Serves on `addr` until the process ends.
pub async fn run(addr: SocketAddr, fail_first: usize) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    eprintln!("gvl-sim receive: listening on {addr} (FAIL_FIRST={fail_first})");
    let receiver = Arc::new(Receiver::new(fail_first));
    loop {
        let (stream, _) = listener.accept().await?;
        let receiver = receiver.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| serve_one(receiver.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_are_kept_in_order_and_listed_and_the_first_ones_can_fail() {
        let r = Receiver::new(1);
        let mut h = http::HeaderMap::new();
        h.insert("X-Concurrency-Event", "Started".parse().unwrap());
        let (first, _) = r.handle(&Method::POST, "/hook", &h, b"{\"a\":1}");
        let (second, _) = r.handle(&Method::POST, "/hook", &http::HeaderMap::new(), b"{}");
        let (other, _) = r.handle(&Method::POST, "/slack", &http::HeaderMap::new(), b"{}");
        assert_eq!(
            (first, second, other),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                StatusCode::OK,
                StatusCode::SERVICE_UNAVAILABLE
            )
        );
        let (status, json) = r.handle(&Method::GET, "/received", &http::HeaderMap::new(), b"");
        assert_eq!(status, StatusCode::OK);
        let kept: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(kept[0]["path"], "/hook");
        assert_eq!(kept[0]["headers"]["x-concurrency-event"], "Started");
        assert_eq!(kept[0]["body"], "{\"a\":1}");
        assert_eq!(kept[0]["status"], 503);
        assert_eq!(kept[2]["path"], "/slack");
        assert_eq!(
            r.handle(&Method::GET, "/nope", &http::HeaderMap::new(), b"")
                .0,
            StatusCode::NOT_FOUND
        );
    }
}
