//! The Prometheus client: one instant query, one number — the `MetricSource` the operator and
//! the kubectl plugin analyse with.
//!
//! A check's query must yield one value: an empty vector is "no data" (`None`), a scalar or a
//! single series is the value, and several series are an error rather than silently summed —
//! a query that forgot its `sum()`/`max()` would otherwise compare totals of a different
//! number of pods per variant.

use std::time::Duration;

use jiff::Timestamp;
use prometheus_http_query::response::Data;
use prometheus_http_query::{Client, Error as ClientError};

use crate::analysis::{MetricSource, PrometheusError};
use crate::api::Analysis;

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

/// A client for the spec's Prometheus with the default per-query timeout.
pub fn client_for(analysis: &Analysis) -> Result<PrometheusClient, PrometheusError> {
    PrometheusClient::new(&analysis.prometheus.url, DEFAULT_TIMEOUT)
}

impl MetricSource for PrometheusClient {
    async fn query_value(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> Result<Option<f64>, PrometheusError> {
        PrometheusClient::query_value(self, promql, at).await
    }
}
