//! What Prometheus' HTTP API answers, read as the operator needs it: one value, one value per
//! label, or one range — and every other answer (several series, an error, a proxy's page) as
//! a `PrometheusError` that says what came back. Pure: the client hands it the status and the
//! body it read.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::analysis::PrometheusError;

/// Longest piece of a Prometheus or proxy error message kept in a reason.
pub(super) const MAX_ERROR_TEXT: usize = 512;

/// `text` on one line, cut to at most `max` bytes at a character boundary (`api::truncate`,
/// the one home of byte budgets).
pub(super) fn truncate(text: &str, max: usize) -> String {
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
