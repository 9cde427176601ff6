//! The pre-flight series lookup through the reconciler, against the fake API server and a
//! fake Prometheus that knows which metric names exist: a missing series ends `Invalid` with
//! nothing created; a pass is recorded once and never looked up again.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase};

/// A yabeda-rails app on Kubernetes, scraped for a while: its request series and cAdvisor's.
const YABEDA_APP: [&str; 6] = [
    "up",
    "rails_requests_total",
    "rails_request_duration_seconds_bucket",
    "rails_request_duration_seconds_count",
    "container_memory_working_set_bytes",
    "container_cpu_usage_seconds_total",
];

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// Answers a series lookup with 1 when its metric is in `names`, with no data otherwise, and
/// counts the lookups; any other query gets `100`.
async fn prometheus_with(names: &'static [&'static str]) -> (String, Arc<AtomicUsize>) {
    prometheus_requiring(names, None).await
}

/// As `prometheus_with`, and with `token` a request without `Authorization: Bearer <token>`
/// gets a 401 (and is not counted).
async fn prometheus_requiring(
    names: &'static [&'static str],
    token: Option<&'static str>,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let lookups = Arc::new(AtomicUsize::new(0));
    let counted = lookups.clone();
    let names: BTreeSet<&str> = names.iter().copied().collect();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (names, counted) = (names.clone(), counted.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request);
                let line = head.lines().next().unwrap_or_default();
                if let Some(token) = token {
                    let bearer = format!("authorization: bearer {token}");
                    if !head.lines().any(|l| l.to_lowercase() == bearer) {
                        let body = r#"{"status":"error","error":"Unauthorized"}"#;
                        let response = format!(
                            "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(response.as_bytes()).await;
                        return;
                    }
                }
                let query = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|target| target.split_once("query="))
                    .map(|(_, q)| percent_decode(q.split('&').next().unwrap_or_default()))
                    .unwrap_or_default();
                let lookup = query
                    .strip_prefix("count(last_over_time(")
                    .or_else(|| query.strip_prefix("count(max_over_time("));
                let value = match lookup {
                    Some(rest) => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let name = &rest[..rest.find('{').unwrap_or(0)];
                        names.contains(name).then_some("1")
                    }
                    None => Some("100"),
                };
                let result = match value {
                    Some(v) => json!([{"metric": {}, "value": [1796000000, v]}]),
                    None => json!([]),
                };
                let body = json!({"status": "success", "data": {"resultType": "vector",
                    "result": result}})
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (url, lookups)
}

fn fake_for(checks: serde_json::Value, url: String) -> FakeApi {
    let mut exp = experiment();
    exp.spec.analysis.checks = serde_json::from_value(checks).unwrap();
    exp.spec.analysis.prometheus.url = url;
    let mut fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    fake.preflight = true;
    fake
}

#[tokio::test]
async fn a_series_that_never_existed_is_invalid_with_nothing_created() {
    let (url, lookups) = prometheus_with(&YABEDA_APP).await;
    let fake = fake_for(
        json!([{"metric": "latency", "maxIncrease": "10%"}, {"metric": "gvlWait", "max": "15%"}]),
        url,
    );
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Invalid);
    // Only the status: no Deployment, no finalizer, nothing of the user's touched.
    assert_eq!(fake.lines(), [format!("PATCH {EXP}/status")]);
    assert_eq!(fake.event_reasons(), ["SeriesMissing"]);
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    let msg = status.message.unwrap();
    for part in [
        "check gvlWait",
        "ruby_gvl_wait_seconds_total",
        "no published gem writes it",
        "queueTime",
    ] {
        assert!(msg.contains(part), "{part:?} not in {msg}");
    }
    assert!(lookups.load(Ordering::SeqCst) > 0);
    // Invalid is final: the next reconcile looks up nothing and writes nothing.
    fake.clear_calls();
    let before = lookups.load(Ordering::SeqCst);
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.lines().is_empty(), "{:?}", fake.lines());
    assert_eq!(lookups.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn a_pass_is_recorded_and_never_looked_up_again() {
    let (url, lookups) = prometheus_with(&YABEDA_APP).await;
    let fake = fake_for(
        json!([{"metric": "latency", "maxIncrease": "10%"}, {"metric": "errorRate", "max": "1%"}]),
        url,
    );
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Progressing);
    assert!(
        fake.lines().contains(&format!("PATCH {CANDIDATE}")),
        "{:?}",
        fake.lines()
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let preflight = exp.status.unwrap().preflight.unwrap();
    assert!(preflight.passed_at.is_some(), "{preflight:?}");
    let looked = lookups.load(Ordering::SeqCst);
    assert!(looked > 0);
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), looked, "looked up again");
}

#[tokio::test]
async fn prometheus_unreachable_waits_with_nothing_created() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fake = fake_for(
        json!([{"metric": "latency", "maxIncrease": "10%"}]),
        format!("http://127.0.0.1:{port}"),
    );
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Pending);
    assert_eq!(fake.lines(), [format!("PATCH {EXP}/status")]);
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let msg = exp.status.unwrap().message.unwrap();
    assert!(
        msg.starts_with("The pre-flight series lookup failed"),
        "{msg}"
    );
    // The same answer again: nothing to write.
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.lines().is_empty(), "{:?}", fake.lines());
}

/// An experiment that names a credentials set and no URL: the pre-flight lookup goes to the
/// set's Prometheus with its token, as the analyses do — not to the spec's (empty) URL, which
/// left such an experiment Pending until its deadline.
#[tokio::test]
async fn the_lookup_uses_the_experiments_credentials() {
    let (url, lookups) = prometheus_requiring(&YABEDA_APP, Some("s3cret")).await;
    let dir = std::env::temp_dir().join(format!("cexp-preflight-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let mut fake = fake_for(
        json!([{"metric": "latency", "maxIncrease": "10%"}, {"metric": "gvlWait", "max": "15%"}]),
        String::new(),
    );
    fake.prometheus = crate::prometheus::ProvidersConfig::parse(&format!(
        "credentials:\n  team-a:\n    url: {url}\n    bearerTokenFile: {}\n",
        token.display()
    ))
    .unwrap();
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.analysis.prometheus.credentials = Some("team-a".into());
    fake.put(EXP, exp);
    reconcile_stored(&fake).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // Looked up with the token, and the answer judged: gvlWait's series is missing.
    assert!(lookups.load(Ordering::SeqCst) > 0);
    assert_eq!(stored_phase(&fake), Phase::Invalid);
    assert_eq!(fake.event_reasons(), ["SeriesMissing"]);
}
