//! The Prometheus client: one instant query, one number.
//!
//! A check's query must yield one value: an empty vector is "no data" (`None`), a scalar or a
//! single series is the value, and several series are an error rather than silently summed —
//! a query that forgot its `sum()`/`max()` would otherwise compare totals of a different
//! number of pods per variant.

use std::time::Duration;

use jiff::Timestamp;
use prometheus_http_query::response::Data;
use prometheus_http_query::{Client, Error as ClientError};

#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error("Prometheus URL {url:?} is not usable: {message}")]
    InvalidUrl { url: String, message: String },
    #[error("cannot set up the HTTP client for Prometheus at {url:?}: {message}")]
    ClientSetup { url: String, message: String },
    #[error("Prometheus is unreachable: {0}")]
    Unreachable(String),
    #[error("Prometheus did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Prometheus rejected the query: {0}")]
    BadQuery(String),
    #[error("Prometheus failed to evaluate the query: {0}")]
    Server(String),
    #[error("the query returned {0}; a check needs exactly one value (wrap it in sum(), max() or avg())")]
    NotOneValue(String),
}

impl PrometheusError {
    /// Short category for Events, metric labels and check reasons.
    pub fn category(&self) -> &'static str {
        match self {
            PrometheusError::InvalidUrl { .. } => "PrometheusURLInvalid",
            PrometheusError::ClientSetup { .. } => "PrometheusClientSetup",
            PrometheusError::Unreachable(_) => "PrometheusUnreachable",
            PrometheusError::Timeout(_) => "PrometheusTimeout",
            PrometheusError::BadQuery(_) => "QueryRejected",
            PrometheusError::Server(_) => "PrometheusError",
            PrometheusError::NotOneValue(_) => "QueryNotOneValue",
        }
    }
}

/// Default budget per query, covering connect, evaluation and transfer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Told how long each query took (answered or not), e.g. to feed a histogram.
pub type QueryTimer = std::sync::Arc<dyn Fn(Duration) + Send + Sync>;

#[derive(Clone)]
pub struct PrometheusClient {
    client: Client,
    url: String,
    timeout: Duration,
    timer: Option<QueryTimer>,
}

impl std::fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl PrometheusClient {
    pub fn new(url: &str, timeout: Duration) -> Result<Self, PrometheusError> {
        let http = http_client(url)?;
        let client = Client::from(http, url).map_err(|e| PrometheusError::InvalidUrl {
            url: url.to_string(),
            message: e.to_string(),
        })?;
        Ok(Self {
            client,
            url: url.to_string(),
            timeout,
            timer: None,
        })
    }

    /// The same client, reporting each query's duration to `timer`.
    pub fn timed(self, timer: QueryTimer) -> Self {
        Self {
            timer: Some(timer),
            ..self
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Evaluates `promql` at `at`. The whole request is bounded by the client's timeout, and
    /// Prometheus is asked to give up evaluating at the same point.
    pub async fn query_value(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> Result<Option<f64>, PrometheusError> {
        let millis = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        let request = self
            .client
            .query(promql)
            .at(at.as_second())
            .timeout(millis)
            .get();
        let started = std::time::Instant::now();
        let response = tokio::time::timeout(self.timeout, request).await;
        if let Some(timer) = &self.timer {
            timer(started.elapsed());
        }
        let response = response
            .map_err(|_| PrometheusError::Timeout(self.timeout))?
            .map_err(|e| classify(e, self.timeout))?;
        one_value(response.data())
    }
}

/// The HTTP client, built so that failures are errors: `reqwest::Client::new()` (what
/// prometheus-http-query would use) panics when no CA certificates can be loaded, as in an image
/// without a CA bundle. A plain `http://` URL needs none, so it gets a client that trusts no
/// certificate authority (an https redirect then fails verification instead of connecting
/// unverified); an `https://` URL reports what is missing.
fn http_client(url: &str) -> Result<reqwest::Client, PrometheusError> {
    let error = match reqwest::Client::builder().build() {
        Ok(client) => return Ok(client),
        Err(e) => e,
    };
    match reqwest::Url::parse(url) {
        Ok(u) if u.scheme() == "http" => {
            tracing::debug!(error = %chain(&error), "no usable TLS roots; Prometheus is plain http");
            reqwest::Client::builder()
                .tls_certs_only(std::iter::empty())
                .build()
                .map_err(|e| client_setup(url, chain(&e)))
        }
        Ok(_) => Err(client_setup(
            url,
            format!(
                "{}; an https URL needs CA certificates: install a CA bundle in the operator \
                 image (/etc/ssl/certs/ca-certificates.crt) or point SSL_CERT_FILE at one",
                chain(&error)
            ),
        )),
        Err(e) => Err(PrometheusError::InvalidUrl {
            url: url.to_string(),
            message: e.to_string(),
        }),
    }
}

fn client_setup(url: &str, message: String) -> PrometheusError {
    PrometheusError::ClientSetup {
        url: url.to_string(),
        message,
    }
}

fn classify(error: ClientError, timeout: Duration) -> PrometheusError {
    match &error {
        ClientError::Prometheus(e) if e.is_timeout() || e.is_canceled() => {
            PrometheusError::Timeout(timeout)
        }
        ClientError::Prometheus(e) if e.is_bad_data() => {
            PrometheusError::BadQuery(e.message().to_string())
        }
        ClientError::Prometheus(e) => PrometheusError::Server(e.to_string()),
        ClientError::Client(e) => match e.inner() {
            Some(r) if r.is_timeout() => PrometheusError::Timeout(timeout),
            Some(r) if r.is_connect() => PrometheusError::Unreachable(chain(&error)),
            // A non-JSON answer (a proxy's error page, a 5xx) or a broken body.
            _ => PrometheusError::Server(chain(&error)),
        },
        ClientError::ParseUrl(e) => PrometheusError::InvalidUrl {
            url: String::new(),
            message: e.to_string(),
        },
        _ => PrometheusError::Server(chain(&error)),
    }
}

/// The error and its causes on one line ("error sending request: … Connection refused").
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

fn one_value(data: &Data) -> Result<Option<f64>, PrometheusError> {
    match data {
        Data::Scalar(s) => Ok(Some(s.value())),
        Data::Vector(v) if v.is_empty() => Ok(None),
        Data::Vector(v) if v.len() == 1 => Ok(Some(v[0].sample().value())),
        Data::Vector(v) => Err(PrometheusError::NotOneValue(format!("{} series", v.len()))),
        Data::Matrix(_) => Err(PrometheusError::NotOneValue("a range vector".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_up_front() {
        let e = PrometheusClient::new("not a url", DEFAULT_TIMEOUT).unwrap_err();
        assert_eq!(e.category(), "PrometheusURLInvalid");
        assert!(e.to_string().contains("not a url"), "{e}");
        assert!(PrometheusClient::new("http://127.0.0.1:9090", DEFAULT_TIMEOUT).is_ok());
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable() {
        // Bind then drop: the port was free a moment ago and nothing listens now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c =
            PrometheusClient::new(&format!("http://127.0.0.1:{port}"), DEFAULT_TIMEOUT).unwrap();
        let timed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = timed.clone();
        let c = c.timed(std::sync::Arc::new(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
        assert_eq!(e.category(), "PrometheusUnreachable", "{e}");
        assert_eq!(
            timed.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "a failed query is timed too"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        // Accepts the connection, never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                open.push(s);
            }
        });
        let c = PrometheusClient::new(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_millis(300),
        )
        .unwrap();
        let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
        assert_eq!(e.category(), "PrometheusTimeout", "{e}");
        hold.abort();
    }

    /// Marks the child process of `without_a_ca_bundle_http_works_and_https_is_refused`.
    const NO_CA_CHILD: &str = "CONCURRENCY_OPERATOR_TEST_NO_CA_CHILD";

    /// An image without a CA bundle (scratch, distroless/static) must not crash the operator:
    /// reqwest's `Client::new()` panics when no root certificates load. rustls-native-certs
    /// reads only `SSL_CERT_FILE`/`SSL_CERT_DIR` when they are set, and environment variables
    /// are process-wide, so this test runs itself again in a child process where both point
    /// nowhere.
    #[tokio::test]
    async fn without_a_ca_bundle_http_works_and_https_is_refused() {
        if std::env::var_os(NO_CA_CHILD).is_some() {
            return without_ca_bundle().await;
        }
        let module = module_path!().split_once("::").unwrap().1;
        let name = format!("{module}::without_a_ca_bundle_http_works_and_https_is_refused");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
            .env(NO_CA_CHILD, "1")
            .env(
                "SSL_CERT_FILE",
                "/nonexistent/concurrency-operator-test/ca.pem",
            )
            .env(
                "SSL_CERT_DIR",
                "/nonexistent/concurrency-operator-test/certs",
            )
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child without CA bundle:\n{stdout}\n{stderr}"
        );
    }

    async fn without_ca_bundle() {
        let e =
            PrometheusClient::new("https://prometheus.example:9090", DEFAULT_TIMEOUT).unwrap_err();
        assert_eq!(e.category(), "PrometheusClientSetup", "{e}");
        let text = e.to_string();
        assert!(text.contains("No CA certificates were loaded"), "{text}");
        assert!(text.contains("https://prometheus.example:9090"), "{text}");
        let e = PrometheusClient::new("not a url", DEFAULT_TIMEOUT).unwrap_err();
        assert_eq!(e.category(), "PrometheusURLInvalid", "{e}");
        // A plain http URL needs no roots: a real query against a canned Prometheus answer.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            let body = r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1.5"]}}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
        let c =
            PrometheusClient::new(&format!("http://127.0.0.1:{port}"), DEFAULT_TIMEOUT).unwrap();
        assert_eq!(
            c.query_value("up", Timestamp::now()).await.unwrap(),
            Some(1.5)
        );
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /api/v1/query?"), "{request}");
    }
}
