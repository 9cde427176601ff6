//! One keep-alive HTTP/1.1 connection per load connection (hyper's client connection API),
//! reconnecting after any error.

use super::engine::{SendFuture, Sender};
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;

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

pub struct HttpSender {
    addr: SocketAddr,
    host_header: String,
    path: String,
    conn: Option<SendRequest<Empty<Bytes>>>,
}

impl HttpSender {
    /// `addr` is the already checked address; the name is only the Host header.
    pub fn new(addr: SocketAddr, target: &Target) -> Self {
        HttpSender {
            addr,
            host_header: format!("{}:{}", target.host, target.port),
            path: target.path.clone(),
            conn: None,
        }
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, String> {
        let stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    async fn send_once(&mut self) -> Result<u16, String> {
        let mut conn = match self.conn.take() {
            Some(c) if !c.is_closed() => c,
            _ => self.connect().await?,
        };
        conn.ready().await.map_err(|e| format!("connection: {e}"))?;
        let req = Request::get(self.path.as_str())
            .header(http::header::HOST, self.host_header.as_str())
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("request: {e}"))?;
        let resp = conn
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        resp.into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?;
        // Only a connection that completed a whole exchange is reused.
        self.conn = Some(conn);
        Ok(status)
    }
}

impl Sender for HttpSender {
    fn send(&mut self) -> SendFuture<'_> {
        Box::pin(self.send_once())
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
