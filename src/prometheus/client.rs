//! The Prometheus client: one instant query, one number — the `MetricSource` the operator and
//! the kubectl plugin analyse with.
//!
//! A check's query must yield one value: an empty vector is "no data" (`None`), a scalar or a
//! single series is the value, and several series are an error rather than silently summed —
//! a query that forgot its `sum()`/`max()` would otherwise compare totals of a different
//! number of pods per variant.
//!
//! Everything a tenant's experiment can make Prometheus send back is bounded: the body is read
//! as a stream and given up past [`MAX_RESPONSE_BYTES`] (a million-series answer would
//! otherwise be held whole, and the operator OOM-killed for every experiment), the whole query
//! by the timeout, and the queries in flight per endpoint by [`MAX_IN_FLIGHT`]. Redirects are
//! not followed (the operator must not be steered to another address), and no URL is printed
//! with its `user:pass@`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::Semaphore;

use super::provider::{Auth, Provider, Username};
use super::response::{parse_by_label, parse_range, parse_response, truncate, MAX_ERROR_TEXT};
use super::transport::{http_client, percent_decode, read_capped, read_secret, Capped};
use crate::analysis::{MetricSource, PrometheusError};
use crate::api::Analysis;
use crate::telemetry::redact::{error_chain, url_for_display};

/// Default budget per query, covering the wait for a slot, connect, evaluation and transfer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest response body read, 1 MiB. A check's query returns one value, a few hundred bytes;
/// a query that returns many series (a forgotten `sum()`, `{__name__=~".+"}`) is an error
/// anyway, and must not cost the operator its memory.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Queries in flight per endpoint (per client); more wait for a slot within their timeout, so
/// one slow Prometheus holds at most this many of the operator's connections and tasks.
pub const MAX_IN_FLIGHT: usize = 4;

/// Longest encoded query sent with GET; longer goes as a POST form.
const MAX_GET_QUERY: usize = 4096;

/// Most steps a range query asks for: Prometheus' own limit per series.
pub const MAX_RANGE_POINTS: usize = 11_000;
/// Told how long each query took (answered or not), e.g. to feed a histogram.
pub type QueryTimer = Arc<dyn Fn(Duration) + Send + Sync>;

#[derive(Clone)]
pub struct PrometheusClient {
    http: reqwest::Client,
    /// `<url>/api/v1/query`, without userinfo (that is sent as basic auth).
    endpoint: reqwest::Url,
    /// `<url>/api/v1/query_range`, the same way.
    range_endpoint: reqwest::Url,
    /// The base URL as it may be printed.
    display: String,
    auth: Auth,
    /// Basic auth from the URL's `user:pass@`, when the provider has no credentials of its own.
    url_auth: Option<(String, Option<String>)>,
    headers: HeaderMap,
    timeout: Duration,
    timer: Option<QueryTimer>,
    slots: Arc<Semaphore>,
}

impl std::fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("url", &self.display)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl PrometheusClient {
    /// A client for a bare URL (no credentials beyond a `user:pass@` in it).
    pub fn new(url: &str, timeout: Duration) -> Result<Self, PrometheusError> {
        Self::for_provider(&Provider::from_url(url), timeout)
    }

    /// A client for a resolved provider: its URL (a path prefix kept), credentials files, TLS
    /// and headers.
    pub fn for_provider(provider: &Provider, timeout: Duration) -> Result<Self, PrometheusError> {
        let display = url_for_display(&provider.url);
        let invalid = |message: String| PrometheusError::InvalidUrl {
            url: display.clone(),
            message,
        };
        let mut base = super::endpoint::base_url(&provider.url).map_err(invalid)?;
        let url_auth = match (base.username(), base.password()) {
            ("", None) => None,
            (user, password) => Some((percent_decode(user), password.map(percent_decode))),
        };
        // Userinfo is never part of a request line or an error: it becomes basic auth.
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let path = format!("{}/api/v1/query", base.path().trim_end_matches('/'));
        base.set_path(&path);
        let mut range_endpoint = base.clone();
        range_endpoint.set_path(&format!("{path}_range"));
        let mut headers = HeaderMap::new();
        for (k, v) in &provider.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| invalid(format!("header {k}: {e}")))?;
            let value =
                HeaderValue::from_str(v).map_err(|e| invalid(format!("header {k}: {e}")))?;
            headers.insert(name, value);
        }
        let http = http_client(provider, &display, MAX_IN_FLIGHT)?;
        Ok(Self {
            http,
            endpoint: base,
            range_endpoint,
            display,
            auth: provider.auth.clone(),
            url_auth,
            headers,
            timeout,
            timer: None,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        })
    }

    /// The same client, reporting each query's duration to `timer`.
    pub fn timed(self, timer: QueryTimer) -> Self {
        Self {
            timer: Some(timer),
            ..self
        }
    }

    /// The base URL, with any `user:pass@` redacted.
    pub fn url(&self) -> &str {
        &self.display
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Evaluates `promql` at `at`. The whole request — waiting for a slot included — is
    /// bounded by the client's timeout, and Prometheus is asked to give up evaluating at the
    /// same point.
    pub async fn query_value(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> Result<Option<f64>, PrometheusError> {
        let (status, body) = self.timed_query(promql, at).await?;
        parse_response(status, &body, self.timeout)
    }

    /// Evaluates `promql` at `at`, a vector of at most `MAX_SERIES` series: each series'
    /// `label` and value (a histogram's buckets by `le`).
    pub async fn query_by_label(
        &self,
        promql: &str,
        at: Timestamp,
        label: &str,
    ) -> Result<Vec<(String, f64)>, PrometheusError> {
        let (status, body) = self.timed_query(promql, at).await?;
        parse_by_label(status, &body, self.timeout, label)
    }

    /// Evaluates `promql` from `start` to `end` every `step` (the report's history): the one
    /// series it yields, as `(unix seconds, value)` points; none for no data. At most
    /// [`MAX_RANGE_POINTS`] steps are asked for, and several series are an error as for
    /// `query_value`.
    pub async fn query_range(
        &self,
        promql: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    ) -> Result<Vec<(f64, f64)>, PrometheusError> {
        let step_s = step.as_secs_f64().max(1.0);
        let span = (end.as_second() - start.as_second()).max(0) as f64;
        if span / step_s > MAX_RANGE_POINTS as f64 {
            return Err(PrometheusError::BadQuery(format!(
                "a range of {span} s every {step_s} s is more than {MAX_RANGE_POINTS} points"
            )));
        }
        let params = [
            ("query", promql.to_string()),
            ("start", unix(start)),
            ("end", unix(end)),
            ("step", format!("{step_s}")),
        ];
        let (status, body) = self.send_timed(&self.range_endpoint, &params).await?;
        parse_range(status, &body, self.timeout)
    }

    async fn timed_query(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> Result<(u16, Vec<u8>), PrometheusError> {
        let params = [("query", promql.to_string()), ("time", unix(at))];
        self.send_timed(&self.endpoint, &params).await
    }

    /// One request, bounded by the client's timeout (waiting for a slot included) and told to
    /// the timer, answered or not.
    async fn send_timed(
        &self,
        endpoint: &reqwest::Url,
        params: &[(&str, String)],
    ) -> Result<(u16, Vec<u8>), PrometheusError> {
        let started = Instant::now();
        let answer = tokio::time::timeout(self.timeout, self.request(endpoint, params)).await;
        if let Some(timer) = &self.timer {
            timer(started.elapsed());
        }
        answer.map_err(|_| PrometheusError::Timeout(self.timeout))?
    }

    async fn request(
        &self,
        endpoint: &reqwest::Url,
        params: &[(&str, String)],
    ) -> Result<(u16, Vec<u8>), PrometheusError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| PrometheusError::Server("the client is shutting down".into()))?;
        let millis = self.timeout.as_millis();
        // In a block: the serializer is not `Send` and must be gone before the first await.
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (k, v) in params {
                form.append_pair(k, v);
            }
            form.append_pair("timeout", &format!("{millis}ms")).finish()
        };
        // GET as Grafana and promtool do; a long query (rendered custom checks) goes as a POST
        // form instead, since proxies often cap the request line at 8 KiB.
        let mut request = match form.len() > MAX_GET_QUERY {
            false => {
                let mut url = endpoint.clone();
                url.set_query(Some(&form));
                self.http.get(url)
            }
            true => self
                .http
                .post(endpoint.clone())
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(form),
        }
        .headers(self.headers.clone());
        request = match &self.auth {
            Auth::None => match &self.url_auth {
                Some((user, password)) => request.basic_auth(user, password.as_deref()),
                None => request,
            },
            Auth::BearerTokenFile(path) => {
                request.bearer_auth(read_secret(path, "bearer token").await?)
            }
            Auth::Basic {
                username,
                password_file,
            } => {
                let user = match username {
                    Username::Literal(u) => u.clone(),
                    Username::File(path) => read_secret(path, "basic auth username").await?,
                };
                let password = read_secret(password_file, "basic auth password").await?;
                request.basic_auth(user, Some(password))
            }
        };
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(url_for_display)
                .unwrap_or_else(|| "nowhere".into());
            return Err(PrometheusError::Redirected {
                status: status.as_u16(),
                location: truncate(&to, MAX_ERROR_TEXT),
            });
        }
        let body = read_capped(response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                Capped::TooLarge => PrometheusError::ResponseTooLarge {
                    limit: MAX_RESPONSE_BYTES,
                },
                Capped::Transport(e) => self.transport(e),
            })?;
        Ok((status.as_u16(), body))
    }

    fn transport(&self, e: reqwest::Error) -> PrometheusError {
        if e.is_timeout() {
            return PrometheusError::Timeout(self.timeout);
        }
        let connect = e.is_connect();
        let message = format!("{}: {}", self.display, error_chain(&e.without_url()));
        match connect {
            true => PrometheusError::Unreachable(message),
            false => PrometheusError::Server(message),
        }
    }
}

/// A time as Prometheus' API takes it: unix seconds with milliseconds.
fn unix(at: Timestamp) -> String {
    format!(
        "{}.{:03}",
        at.as_second(),
        at.subsec_millisecond().unsigned_abs()
    )
}

/// A client for the spec's Prometheus URL with the default per-query timeout (no operator
/// configuration: the kubectl plugin's view).
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

    async fn query_by_label(
        &self,
        promql: &str,
        at: Timestamp,
        label: &str,
    ) -> Result<Vec<(String, f64)>, PrometheusError> {
        PrometheusClient::query_by_label(self, promql, at, label).await
    }
}
