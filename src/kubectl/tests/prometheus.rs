//! A canned Prometheus for the commands that query one (`recommend`, `init`, `report`): a real
//! HTTP server on loopback answering instant and range queries from a table, recording what it
//! was asked.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use serde_json::json;

/// A Prometheus that answers every query by the first `(fragment, value)` whose fragment the
/// query contains: `Some(v)` a one-sample vector (a range query: `v` at every step), `None` an
/// empty answer (no data).
pub async fn canned_prometheus(
    answers: Vec<(&'static str, Option<f64>)>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    canned_prometheus_with(answers, Vec::new()).await
}

/// As `canned_prometheus`, and an instant query containing a fragment of `vectors` answers its
/// series by `le` (a histogram's buckets), before any single value.
pub async fn canned_prometheus_with(
    answers: Vec<(&'static str, Option<f64>)>,
    vectors: Vec<(&'static str, Vec<(String, f64)>)>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let queries: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = queries.clone();
    let answers = Arc::new(answers);
    let vectors = Arc::new(vectors);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answers = answers.clone();
            let vectors = vectors.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let params = req.uri().query().unwrap_or_default().to_string();
                    let param = |name: &str| {
                        params
                            .split('&')
                            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                            .map(url_decode)
                    };
                    let query = param("query").unwrap_or_default();
                    record.lock().unwrap().push(query.clone());
                    let value = answers
                        .iter()
                        .find(|(fragment, _)| query.contains(fragment))
                        .and_then(|(_, v)| *v);
                    // A range query: the value at every step from start to end.
                    let range = req.uri().path().ends_with("/query_range");
                    let number = |name: &str| param(name).and_then(|v| v.parse::<f64>().ok());
                    let series = vectors
                        .iter()
                        .find(|(fragment, _)| query.contains(fragment))
                        .map(|(_, s)| s);
                    let body = match (range, value) {
                        (false, _) if series.is_some() => {
                            let result: Vec<_> = series
                                .into_iter()
                                .flatten()
                                .map(|(le, v)| {
                                    json!({"metric": {"le": le}, "value": [1764464400, v.to_string()]})
                                })
                                .collect();
                            json!({"status": "success", "data": {"resultType": "vector", "result": result}})
                        }
                        (true, Some(v)) => {
                            let (start, end, step) = (
                                number("start").unwrap_or(0.0),
                                number("end").unwrap_or(0.0),
                                number("step").unwrap_or(1.0).max(1.0),
                            );
                            let mut values = Vec::new();
                            let mut t = start;
                            while t <= end {
                                values.push(json!([t, v.to_string()]));
                                t += step;
                            }
                            json!({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}})
                        }
                        (true, None) => {
                            json!({"status": "success", "data": {"resultType": "matrix", "result": []}})
                        }
                        (false, value) => {
                            let result = match value {
                                Some(v) => {
                                    json!([{"metric": {}, "value": [1764464400, v.to_string()]}])
                                }
                                None => json!([]),
                            };
                            json!({"status": "success", "data": {"resultType": "vector", "result": result}})
                        }
                    };
                    async move {
                        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
                        r.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (url, queries)
}

/// `application/x-www-form-urlencoded` decoding of one value.
fn url_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
