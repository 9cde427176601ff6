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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

use super::provider::{Auth, Provider, Username};
use super::tls::tls_config;
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

/// Largest token, username or password file read (a JWT is a few KiB).
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// Longest encoded query sent with GET; longer goes as a POST form.
const MAX_GET_QUERY: usize = 4096;

/// Longest piece of a Prometheus or proxy error message kept in a reason.
const MAX_ERROR_TEXT: usize = 512;

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
        let mut base = super::provider::base_url(&provider.url).map_err(invalid)?;
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
        let http = http_client(provider, &display)?;
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

fn percent_decode(s: &str) -> String {
    // Userinfo is percent-encoded in a URL; `form_urlencoded` decodes the same escapes
    // (and `+`, which a userinfo does not use unescaped).
    form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// A secret file's content, without the trailing newline `kubectl create secret --from-file`
/// keeps; read at every query so a rotated Secret is used without a restart.
async fn read_secret(path: &std::path::Path, what: &str) -> Result<String, PrometheusError> {
    let fail = |message: String| {
        PrometheusError::Credentials(format!(
            "reading the {what} file {}: {message}",
            path.display()
        ))
    };
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(fail(format!("larger than {MAX_SECRET_BYTES} bytes")));
    }
    let text = text.trim_end_matches(['\r', '\n']).to_string();
    if text.is_empty() {
        return Err(fail("empty".into()));
    }
    Ok(text)
}

enum Capped {
    TooLarge,
    Transport(reqwest::Error),
}

/// The body, read chunk by chunk and given up as soon as it passes `cap` bytes: memory per
/// query stays under `cap` plus one chunk whatever the server sends.
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, Capped> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(Capped::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(Capped::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `text` on one line, cut to at most `max` bytes at a character boundary (`api::truncate`,
/// the one home of byte budgets).
fn truncate(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::api::truncate(&line, max)
}

/// The JSON body of `/api/v1/query`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Scalar(Sample),
    Vector(Vec<Series>),
    Matrix(Vec<RangeSeries>),
    String(serde::de::IgnoredAny),
}

/// One series of a range answer. A native histogram has `histograms`, not `values`.
#[derive(Deserialize)]
struct RangeSeries {
    #[serde(default)]
    values: Vec<Point>,
}

/// `[<unix seconds>, "<value>"]` with its time.
#[derive(Deserialize)]
struct Point(f64, String);

/// `[<unix seconds>, "<value>"]`.
#[derive(Deserialize)]
struct Sample(serde::de::IgnoredAny, String);

/// One series of a vector. A native histogram has no `value`.
#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<Sample>,
}

/// Most series a vector answer may have (`query_by_label`): a histogram's buckets are a few
/// dozen; more is a query that was not meant.
pub const MAX_SERIES: usize = 128;

/// Each series' `label` and value, from an answer that must be a vector of at most
/// `MAX_SERIES` series with distinct values of `label`.
pub(crate) fn parse_by_label(
    status: u16,
    body: &[u8],
    timeout: Duration,
    label: &str,
) -> Result<Vec<(String, f64)>, PrometheusError> {
    let series = match parse_data(status, body, timeout)? {
        Data::Vector(v) => v,
        Data::Scalar(_) => {
            return Err(PrometheusError::NotOneValue(
                "a scalar where series by label were expected".into(),
            ))
        }
        Data::Matrix(_) => return Err(PrometheusError::NotOneValue("a range vector".into())),
        Data::String(_) => return Err(PrometheusError::NotOneValue("a string".into())),
    };
    if series.len() > MAX_SERIES {
        return Err(PrometheusError::NotOneValue(format!(
            "{} series, more than the {MAX_SERIES} a histogram's buckets may have",
            series.len()
        )));
    }
    let mut out = Vec::with_capacity(series.len());
    for s in series {
        let Some(key) = s.metric.get(label) else {
            return Err(PrometheusError::NotOneValue(format!(
                "a series without the label {label:?}"
            )));
        };
        let Some(sample) = &s.value else {
            return Err(PrometheusError::NotOneValue(
                "a native histogram sample".into(),
            ));
        };
        out.push((truncate(key, 64), number(&sample.1)?));
    }
    Ok(out)
}

/// The one series of a range answer (none: no data), as `(unix seconds, value)`.
pub(crate) fn parse_range(
    status: u16,
    body: &[u8],
    timeout: Duration,
) -> Result<Vec<(f64, f64)>, PrometheusError> {
    let series = match parse_data(status, body, timeout)? {
        Data::Matrix(m) => m,
        Data::Vector(_) | Data::Scalar(_) => {
            return Err(PrometheusError::NotOneValue(
                "an instant answer to a range query".into(),
            ))
        }
        Data::String(_) => return Err(PrometheusError::NotOneValue("a string".into())),
    };
    match series.as_slice() {
        [] => Ok(Vec::new()),
        [one] => one
            .values
            .iter()
            .map(|p| Ok((p.0, number(&p.1)?)))
            .collect(),
        more => Err(PrometheusError::NotOneValue(format!(
            "{} series",
            more.len()
        ))),
    }
}

/// The value an answer holds, or the error it reports. Prometheus answers errors with a JSON
/// body too (400 bad_data, 422 execution, 503 timeout); anything else not 2xx is an error of
/// whatever is in between (a proxy, an auth gateway).
pub(crate) fn parse_response(
    status: u16,
    body: &[u8],
    timeout: Duration,
) -> Result<Option<f64>, PrometheusError> {
    match parse_data(status, body, timeout)? {
        Data::Scalar(s) => number(&s.1).map(Some),
        Data::Vector(v) => match v.as_slice() {
            [] => Ok(None),
            [one] => match &one.value {
                Some(s) => number(&s.1).map(Some),
                None => Err(PrometheusError::NotOneValue(
                    "a native histogram sample".into(),
                )),
            },
            more => Err(PrometheusError::NotOneValue(format!(
                "{} series",
                more.len()
            ))),
        },
        Data::Matrix(_) => Err(PrometheusError::NotOneValue("a range vector".into())),
        Data::String(_) => Err(PrometheusError::NotOneValue("a string".into())),
    }
}

/// The data of a successful answer, or the error the answer reports.
fn parse_data(status: u16, body: &[u8], timeout: Duration) -> Result<Data, PrometheusError> {
    let parsed: Result<Body, _> = serde_json::from_slice(body);
    if matches!(status, 401 | 403) {
        let text = match &parsed {
            Ok(Body { error: Some(e), .. }) => e.clone(),
            _ => String::from_utf8_lossy(body).into_owned(),
        };
        return Err(PrometheusError::Unauthorized {
            status,
            message: truncate(&text, MAX_ERROR_TEXT),
        });
    }
    let body = match parsed {
        Ok(b) => b,
        Err(e) => {
            let text = String::from_utf8_lossy(body);
            return Err(PrometheusError::Server(
                match (200..300).contains(&status) {
                    true => format!("not a Prometheus answer ({e}): {}", truncate(&text, 200)),
                    false => format!("HTTP {status}: {}", truncate(&text, MAX_ERROR_TEXT)),
                },
            ));
        }
    };
    if body.status != "success" {
        let kind = body.error_type.unwrap_or_default();
        let message = truncate(&body.error.unwrap_or_default(), MAX_ERROR_TEXT);
        return Err(match kind.as_str() {
            "timeout" | "canceled" => PrometheusError::Timeout(timeout),
            "bad_data" => PrometheusError::BadQuery(message),
            _ => PrometheusError::Server(format!("{kind}: {message}")),
        });
    }
    body.data
        .ok_or_else(|| PrometheusError::Server("a success without data".into()))
}

/// A sample value: Prometheus writes floats as strings, `NaN` and `±Inf` included.
fn number(text: &str) -> Result<f64, PrometheusError> {
    text.parse::<f64>().map_err(|_| {
        PrometheusError::Server(format!(
            "sample value {:?} is not a number",
            truncate(text, 64)
        ))
    })
}

/// The HTTP client, built so that failures are errors: `reqwest::Client::new()` panics when
/// no CA certificates can be loaded, as in an image without a CA bundle. A plain `http://` URL
/// needs none, so it gets a client that trusts no certificate authority (an https redirect
/// then fails verification instead of connecting unverified); an `https://` URL reports what
/// is missing. A provider with TLS settings gets its own rustls configuration.
fn http_client(provider: &Provider, display: &str) -> Result<reqwest::Client, PrometheusError> {
    let builder = || {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("concurrency-operator/", env!("CARGO_PKG_VERSION")))
            // The connection pool is per client; one idle connection per slot is plenty.
            .pool_max_idle_per_host(MAX_IN_FLIGHT)
    };
    let setup = |message: String| PrometheusError::ClientSetup {
        url: display.to_string(),
        message,
    };
    if !provider.tls.is_default() {
        let config = tls_config(&provider.tls).map_err(setup)?;
        return builder()
            .tls_backend_preconfigured(config)
            .build()
            .map_err(|e| setup(error_chain(&e)));
    }
    let error = match builder().build() {
        Ok(client) => return Ok(client),
        Err(e) => e,
    };
    if provider.url.trim_start().starts_with("http://") {
        tracing::debug!(error = %error_chain(&error), "no usable TLS roots; Prometheus is plain http");
        builder()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|e| setup(error_chain(&e)))
    } else {
        Err(setup(format!(
            "{}; an https URL needs CA certificates: install a CA bundle in the operator \
             image (/etc/ssl/certs/ca-certificates.crt), point SSL_CERT_FILE at one, or set \
             the provider's tls.caFile",
            error_chain(&error)
        )))
    }
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
