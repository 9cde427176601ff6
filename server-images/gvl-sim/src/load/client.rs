//! One keep-alive HTTP/1.1 connection per load connection (hyper's client connection API),
//! reconnecting after any error and, with `--max-connection-age`, before the first request
//! after the connection has grown too old. Rotating matters behind a Kubernetes Service:
//! kube-proxy picks a backend pod per connection, so only new connections reach new pods.

use super::engine::{SendFuture, Sender};
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UrlError {
    #[error("--url {0:?} is not a URL")]
    Invalid(String),
    #[error("--url {0:?}: only http:// is supported")]
    Scheme(String),
    #[error("--url {0:?} has no host")]
    NoHost(String),
}

/// The parts of `--url` the client needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path and query sent in each request, e.g. `/?io_ms=500`.
    pub path: String,
}

pub fn parse_url(url: &str) -> Result<Target, UrlError> {
    let uri: Uri = url.parse().map_err(|_| UrlError::Invalid(url.into()))?;
    if uri.scheme_str() != Some("http") {
        return Err(UrlError::Scheme(url.into()));
    }
    let host = uri.host().ok_or_else(|| UrlError::NoHost(url.into()))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/".into());
    Ok(Target {
        host,
        port: uri.port_u16().unwrap_or(80),
        path,
    })
}

/// Whether a connection opened at `opened`, with age limit `max_age`, must be replaced
/// before a request sent at `now`.
pub fn past_max_age(opened: Instant, now: Instant, max_age: Option<Duration>) -> bool {
    max_age.is_some_and(|age| now.saturating_duration_since(opened) >= age)
}

/// One connection's own limit: `max_age` scaled into 0.9–1.0 × by `unit` (0..1), so that
/// connections opened together do not all reconnect together (gRPC jitters
/// MAX_CONNECTION_AGE for the same reason), and none outlives the flag.
pub fn jittered(max_age: Duration, unit: f64) -> Duration {
    max_age.mul_f64(1.0 - 0.1 * unit.clamp(0.0, 1.0))
}

/// An open connection and its age limit.
struct Live {
    send: SendRequest<Empty<Bytes>>,
    opened: Instant,
    max_age: Option<Duration>,
}

impl Live {
    fn reusable(&self, now: Instant) -> bool {
        !self.send.is_closed() && !past_max_age(self.opened, now, self.max_age)
    }
}

/// What a request says of its arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// Nothing: no load balancer header.
    None,
    /// `X-Request-Start: t=<unix ms>` (nginx, HAProxy, Envoy).
    Millis,
    /// Only AWS ALB's `X-Amzn-Trace-Id`, whose root id has the arrival second.
    AlbTraceId,
}

pub struct HttpSender {
    addr: SocketAddr,
    host_header: String,
    path: String,
    max_age: Option<Duration>,
    /// The arrival stamp each request carries, as a load balancer adds it.
    stamp: Stamp,
    /// Requests sent on this sender (the ALB trace id's unique part).
    sent: u64,
    conn: Option<Live>,
    opened: u64,
    /// Where the current (or last) request is: for [`Sender::state`].
    stage: &'static str,
    /// The age of the connection the current request went on; `None`: one opened for it.
    reused_age: Option<Duration>,
}

impl HttpSender {
    /// `addr` is the already checked address; the name is only the Host header.
    /// `max_age`: replace a connection once it is this old (`None`: keep it).
    pub fn new(addr: SocketAddr, target: &Target, max_age: Option<Duration>) -> Self {
        HttpSender {
            addr,
            host_header: format!("{}:{}", target.host, target.port),
            path: target.path.clone(),
            max_age,
            stamp: Stamp::Millis,
            sent: 0,
            conn: None,
            opened: 0,
            stage: "idle",
            reused_age: None,
        }
    }

    /// The arrival stamp each request carries (default: `X-Request-Start: t=<unix ms>`).
    pub fn with_stamp(mut self, stamp: Stamp) -> Self {
        self.stamp = stamp;
        self
    }

    async fn connect(&mut self) -> Result<Live, String> {
        let stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let (send, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.opened += 1;
        Ok(Live {
            send,
            opened: Instant::now(),
            max_age: self.max_age.map(|age| jittered(age, fastrand::f64())),
        })
    }

    async fn send_once(&mut self) -> Result<u16, String> {
        let now = Instant::now();
        let live = match self.conn.take() {
            Some(c) if c.reusable(now) => {
                self.reused_age = Some(now.saturating_duration_since(c.opened));
                c
            }
            old => {
                // Closing an old connection here is graceful: only connections whose last
                // answer was read in full are kept, so nothing is in flight on it.
                drop(old);
                self.reused_age = None;
                self.stage = "connect";
                self.connect().await?
            }
        };
        let Live {
            send: mut conn,
            opened,
            max_age,
        } = live;
        self.stage = "ready";
        conn.ready().await.map_err(|e| format!("connection: {e}"))?;
        let mut req =
            Request::get(self.path.as_str()).header(http::header::HOST, self.host_header.as_str());
        // Stamped once the connection is ready, just before the request is written: the
        // moment a load balancer would forward it.
        let now = std::time::SystemTime::now();
        self.sent += 1;
        match self.stamp {
            Stamp::None => {}
            Stamp::Millis => {
                req = req.header(
                    crate::queue_time::HEADER,
                    crate::queue_time::header_value(now),
                )
            }
            Stamp::AlbTraceId => {
                req = req.header(
                    crate::queue_time::AMZN_TRACE_ID,
                    crate::queue_time::alb_trace_id(now, self.sent),
                )
            }
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("request: {e}"))?;
        self.stage = "response";
        let resp = conn
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        self.stage = "body";
        resp.into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?;
        // Only a connection that completed a whole exchange is reused.
        self.conn = Some(Live {
            send: conn,
            opened,
            max_age,
        });
        Ok(status)
    }
}

impl Sender for HttpSender {
    fn send(&mut self) -> SendFuture<'_> {
        Box::pin(self.send_once())
    }

    fn connections_opened(&self) -> u64 {
        self.opened
    }

    fn state(&self) -> String {
        describe(self.stage, self.reused_age)
    }
}

/// `stage` of a request on a connection `reused_age` old, or on one opened for it.
fn describe(stage: &str, reused_age: Option<Duration>) -> String {
    match reused_age {
        Some(age) => format!("{stage}, on a connection {:.1} s old", age.as_secs_f64()),
        None => format!("{stage}, on a connection opened for it"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_with_path_and_query() {
        assert_eq!(
            parse_url("http://127.0.0.1:3000/?io_ms=500&cpu_ms=1").unwrap(),
            Target {
                host: "127.0.0.1".into(),
                port: 3000,
                path: "/?io_ms=500&cpu_ms=1".into()
            }
        );
        let t = parse_url("http://[::1]:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8080, "/")
        );
        assert_eq!(parse_url("http://localhost").unwrap().port, 80);
    }

    #[test]
    fn a_connection_is_replaced_once_it_reaches_its_age() {
        let opened = Instant::now();
        let age = Some(Duration::from_millis(200));
        let at = |ms| opened + Duration::from_millis(ms);
        assert!(!past_max_age(opened, at(0), age));
        assert!(!past_max_age(opened, at(199), age));
        assert!(past_max_age(opened, at(200), age));
        assert!(past_max_age(opened, at(5_000), age));
        // Off: kept for ever.
        assert!(!past_max_age(opened, at(3_600_000), None));
        // A clock reading before the open (cannot happen, but must not panic).
        assert!(!past_max_age(at(10), opened, age));
    }

    #[test]
    fn a_failure_says_where_it_stopped_and_on_what_connection() {
        assert_eq!(
            describe("response", Some(Duration::from_millis(3240))),
            "response, on a connection 3.2 s old"
        );
        assert_eq!(
            describe("connect", None),
            "connect, on a connection opened for it"
        );
    }

    #[test]
    fn jitter_stays_within_the_flag() {
        let age = Duration::from_millis(1000);
        let ms = |unit| jittered(age, unit).as_secs_f64() * 1000.0;
        assert_eq!(jittered(age, 0.0), age);
        assert!((ms(0.5) - 950.0).abs() < 1e-3, "{}", ms(0.5));
        assert!((ms(1.0) - 900.0).abs() < 1e-3, "{}", ms(1.0));
        assert!((ms(7.0) - 900.0).abs() < 1e-3, "{}", ms(7.0));
        assert!((ms(-1.0) - 1000.0).abs() < 1e-3, "{}", ms(-1.0));
    }

    #[test]
    fn refuses_other_schemes_and_junk() {
        assert!(matches!(
            parse_url("https://127.0.0.1/"),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(parse_url("not a url"), Err(UrlError::Invalid(_))));
        assert!(matches!(
            parse_url("/just/a/path"),
            Err(UrlError::Scheme(_))
        ));
    }
}
