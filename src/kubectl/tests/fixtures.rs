//! Test fixtures: experiments as the API server returns them, a scripted API server behind
//! kube's mocked service (tower-test) that answers the exact calls expected in order and
//! records what it got, and a canned Prometheus.

use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use jiff::Timestamp;

use crate::api::ConcurrencyExperiment;
use crate::kubectl::Session;

pub use super::prometheus::{canned_prometheus, canned_prometheus_with};
use crate::test_api::{api_status, content_type, status_response};

pub const NS: &str = "shop";
pub const EXPERIMENTS: &str =
    "/apis/concurrency.dev/v1alpha1/namespaces/shop/concurrencyexperiments";
pub const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";

pub fn exp_path(name: &str) -> String {
    format!("{EXPERIMENTS}/{name}")
}

/// `storefront-threads` at stage 2/3 (70% planned, 67% in force), three analyses kept: a
/// pass and an inconclusive one at stage 1, a pass at stage 2.
pub fn progressing_json() -> Value {
    json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {
            "name": "storefront-threads", "namespace": NS,
            "uid": "5a1e0c2e-0000-4000-8000-000000000001",
            "generation": 1, "resourceVersion": "100",
            "creationTimestamp": "2026-11-30T01:00:00Z",
        },
        "spec": {
            "targetRef": {"name": "storefront"},
            "container": "web",
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "checks": [
                    {"metric": "latency", "quantile": 0.99, "maxIncrease": "10%", "max": "500ms"},
                    {"metric": "queueTime", "quantile": 0.9, "max": "50ms"},
                    {"metric": "memory", "maxIncrease": "20%"},
                    {"metric": "gvlWait", "max": "15%"},
                ],
            },
        },
        "status": {
            "phase": "Progressing",
            "observedGeneration": 1,
            "stageIndex": 1, "stage": "2/3", "stageStartedAt": "2026-11-30T01:10:00Z",
            "plannedWeight": 70, "effectiveWeight": 67,
            "baseline": {
                "deployment": "storefront", "replicas": 2, "readyReplicas": 2,
                "summary": "puma 2×6", "config": {"server": "puma", "workers": 2, "threads": 6},
            },
            "candidate": {
                "deployment": "storefront-candidate", "replicas": 4, "readyReplicas": 4,
                "summary": "puma 2×4", "config": {"server": "puma", "workers": 2, "threads": 4},
            },
            "analyses": [
                analysis("2026-11-30T01:05:00Z", 0, 33, "Pass", (1200.0, 600.0),
                    "all 4 checks passed (requests: baseline 1200, candidate 600)",
                    [(0.072, 0.073, "Pass"), (0.0017, 0.0018, "Pass"), (220200960.0, 203423744.0, "Pass"), (0.0, 0.012, "Pass")]),
                {
                    "at": "2026-11-30T01:06:00Z", "stageIndex": 0, "weight": 33,
                    "verdict": "Inconclusive", "baselineRequests": 1190.0, "candidateRequests": 20.0,
                    "reason": "too few requests in the interval: baseline 1190, candidate 20 (minRequests 50)",
                    "checks": [
                        check("latency", Some(0.071), Some(0.074), "max 500ms, maxIncrease 10%", "Pass", "candidate 74ms within limits"),
                        check("queueTime", Some(0.0016), None, "max 50ms", "Inconclusive", "no data for the candidate"),
                        check("memory", Some(220200960.0), Some(203423744.0), "maxIncrease 20%", "Pass", "ok"),
                        check("gvlWait", Some(0.0), Some(0.011), "max 15%", "Pass", "ok"),
                    ],
                },
                analysis("2026-11-30T01:11:00Z", 1, 67, "Pass", (800.0, 1650.0),
                    "all 4 checks passed (requests: baseline 800, candidate 1650)",
                    [(0.072, 0.073, "Pass"), (0.0017, 0.0019, "Pass"), (220200960.0, 204472320.0, "Pass"), (0.0, 0.013, "Pass")]),
            ],
            "lastVerdict": "Pass",
            "lastAnalysisAt": "2026-11-30T01:11:00Z",
            "failedAnalyses": 0, "inconclusiveAnalyses": 1, "stagePassedAnalyses": 1,
            "message": "Stage 2/3 at 67% of traffic (4 candidate and 2 baseline pods ready); 1 passed analyses in this stage.",
            "recommendation": {
                "ioRatio": 0.52, "threads": 4, "asyncServerAdvised": false,
                "speedups": [1.0, 1.35, 1.53, 1.64],
                "message": "I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)",
            },
            "original": {"replicas": 6},
        },
    })
}

fn check(
    name: &str,
    b: Option<f64>,
    c: Option<f64>,
    limit: &str,
    verdict: &str,
    reason: &str,
) -> Value {
    let mut v = json!({
        "name": name, "query": format!("{name}{{pod=~\"^storefront-candidate-…$\"}}"),
        "limit": limit, "verdict": verdict, "reason": reason,
    });
    if let Some(b) = b {
        v["baseline"] = json!(b);
    }
    if let Some(c) = c {
        v["candidate"] = json!(c);
    }
    v
}

fn analysis(
    at: &str,
    stage: i32,
    weight: i32,
    verdict: &str,
    requests: (f64, f64),
    reason: &str,
    values: [(f64, f64, &str); 4],
) -> Value {
    let names = [
        ("latency", "max 500ms, maxIncrease 10%"),
        ("queueTime", "max 50ms"),
        ("memory", "maxIncrease 20%"),
        ("gvlWait", "max 15%"),
    ];
    let checks: Vec<Value> = names
        .iter()
        .zip(values)
        .map(|((n, l), (b, c, v))| check(n, Some(b), Some(c), l, v, "within limits"))
        .collect();
    json!({
        "at": at, "stageIndex": stage, "weight": weight, "verdict": verdict,
        "baselineRequests": requests.0, "candidateRequests": requests.1,
        "checks": checks, "reason": reason,
    })
}

pub fn progressing() -> ConcurrencyExperiment {
    serde_json::from_value(progressing_json()).unwrap()
}

/// Rolled back at stage 1 by its queue-time check.
pub fn rolled_back_json() -> Value {
    let mut v = progressing_json();
    v["spec"]["analysis"]["failureLimit"] = json!(0);
    let s = &mut v["status"];
    s["phase"] = json!("RolledBack");
    s["stageIndex"] = json!(0);
    s["stage"] = json!("1/3");
    s["plannedWeight"] = json!(30);
    s["effectiveWeight"] = json!(0);
    s["failedAnalyses"] = json!(1);
    s["inconclusiveAnalyses"] = json!(0);
    s["lastVerdict"] = json!("Fail");
    s["message"] = json!("Rolled back: the baseline serves all traffic again.");
    s["candidate"]["replicas"] = json!(0);
    s["candidate"]["readyReplicas"] = json!(0);
    s["analyses"] = json!([{
        "at": "2026-11-30T01:05:00Z", "stageIndex": 0, "weight": 33, "verdict": "Fail",
        "baselineRequests": 1200.0, "candidateRequests": 590.0,
        "reason": "failed: queueTime",
        "checks": [
            check("latency", Some(0.072), Some(0.072), "max 500ms, maxIncrease 10%", "Pass", "within limits"),
            check("queueTime", Some(0.0017), Some(0.4592), "max 50ms", "Fail", "candidate 459.2ms is above max 50ms (baseline 1.7ms)"),
            check("memory", Some(203423744.0), None, "maxIncrease 20%", "Inconclusive", "no data for the candidate"),
            check("gvlWait", Some(0.0), Some(0.0), "max 15%", "Pass", "within limits"),
        ],
    }]);
    s["decision"] = json!({
        "action": "Rollback", "reason": "CheckFailed", "at": "2026-11-30T01:05:02Z",
        "message": "Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).",
    });
    v
}

pub fn rolled_back() -> ConcurrencyExperiment {
    serde_json::from_value(rolled_back_json()).unwrap()
}

/// `progressing_json()` with `f` applied.
pub fn edited(f: impl FnOnce(&mut Value)) -> Value {
    let mut v = progressing_json();
    f(&mut v);
    v
}

/// A Deployment `storefront`: 3 pods of puma 2×6 in container `web`, CPU limit `cpu`.
pub fn deployment_json(cpu: Option<&str>) -> Value {
    let mut container = json!({
        "name": "web", "image": "registry.example/storefront:1.4",
        "env": [
            {"name": "WEB_CONCURRENCY", "value": "2"},
            {"name": "RAILS_MAX_THREADS", "value": "6"},
        ],
    });
    if let Some(cpu) = cpu {
        container["resources"] = json!({"limits": {"cpu": cpu, "memory": "1Gi"}});
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "storefront", "namespace": NS, "resourceVersion": "200"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "storefront"}},
            "template": {
                "metadata": {"labels": {"app": "storefront"}},
                "spec": {"containers": [
                    {"name": "sidecar", "image": "envoy"},
                    container,
                ]},
            },
        },
        "status": {"replicas": 3, "readyReplicas": 3},
    })
}

/// The API server's Status for a failed request, as a real one writes it.
pub fn status(code: u16, reason: &str, message: &str, name: Option<&str>) -> Value {
    let mut v = api_status(code, reason, message);
    if let Some(name) = name {
        v["details"] =
            json!({"name": name, "group": "concurrency.dev", "kind": "concurrencyexperiments"});
    }
    v
}

pub fn forbidden(verb: &str, name: &str) -> Value {
    status(
        403,
        "Forbidden",
        &format!(
            "concurrencyexperiments.concurrency.dev \"{name}\" is forbidden: User \"dev\" cannot {verb} \
             resource \"concurrencyexperiments\" in API group \"concurrency.dev\" in the namespace \"shop\""
        ),
        Some(name),
    )
}

pub fn not_found(name: &str) -> Value {
    status(
        404,
        "NotFound",
        &format!("concurrencyexperiments.concurrency.dev \"{name}\" not found"),
        Some(name),
    )
}

/// One expected call and the answer to it.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub method: &'static str,
    /// The path without the query.
    pub path: String,
    pub code: u16,
    /// Sent as is (a JSON document, or newline-separated watch events).
    pub body: String,
}

impl Exchange {
    pub fn new(method: &'static str, path: &str, code: u16, body: &Value) -> Self {
        Exchange {
            method,
            path: path.to_string(),
            code,
            body: body.to_string(),
        }
    }

    /// A watch response: one JSON event per line.
    pub fn watch(path: &str, events: &[Value]) -> Self {
        Exchange {
            method: "GET",
            path: path.to_string(),
            code: 200,
            body: events.iter().map(|e| format!("{e}\n")).collect(),
        }
    }
}

/// One request as the mock saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub body: Value,
}

impl Seen {
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// A session whose client talks to a server that expects `script` in order. A request that
/// does not match the next exchange gets a 500 and is recorded, so the test's comparison of
/// the calls fails with the whole sequence in view.
pub fn scripted(script: Vec<Exchange>) -> (Session, Arc<Mutex<Vec<Seen>>>, JoinHandle<()>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let server = tokio::spawn(async move {
        let mut script = script.into_iter();
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or_default().to_string();
            let content_type = content_type(&request);
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            record.lock().unwrap().push(Seen {
                method: method.clone(),
                path: path.clone(),
                query,
                content_type,
                body,
            });
            let response = match script.next() {
                Some(e) if e.method == method && e.path == path => {
                    let mut r = Response::new(Body::from(e.body.into_bytes()));
                    *r.status_mut() = StatusCode::from_u16(e.code).unwrap();
                    r
                }
                other => status_response(
                    500,
                    "InternalError",
                    &format!("unexpected call, expected {other:?}"),
                ),
            };
            send.send_response(response);
        }
    });
    let session = Session {
        client: Client::new(service, NS),
        namespace: NS.to_string(),
    };
    (session, seen, server)
}

pub fn lines(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<String> {
    seen.lock().unwrap().iter().map(Seen::line).collect()
}

/// `experiment_detail(&progressing(), now())`, exactly.
pub const PROGRESSING_DETAIL: &str = "\
Name:        storefront-threads
Namespace:   shop
Target:      Deployment storefront, container web
Phase:       Progressing
Stage:       2/3, weight 70% planned / 67% in force
Message:     Stage 2/3 at 67% of traffic (4 candidate and 2 baseline pods ready); 1 passed analyses in this stage.
Baseline:    puma 2×6 — Deployment storefront, 2/2 ready
Candidate:   puma 2×4 — Deployment storefront-candidate, 4/4 ready
Analyses:    0 failed (failureLimit 1), 1 inconclusive (inconclusiveLimit 3)

Latest analysis: 2026-11-30T01:11:00Z (90s ago), stage 2/3, weight 67%, requests baseline 800 / candidate 1650
  CHECK      BASELINE  CANDIDATE  LIMIT                       VERDICT
  latency    72ms      73ms       max 500ms, maxIncrease 10%  ✓ Pass
  queueTime  1.7ms     1.9ms      max 50ms                    ✓ Pass
  memory     210Mi     195Mi      maxIncrease 20%             ✓ Pass
  gvlWait    0%        1.3%       max 15%                     ✓ Pass
  Verdict: ✓ Pass — all 4 checks passed (requests: baseline 800, candidate 1650)

Decision:       none yet
Recommendation: I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)
";

pub fn now() -> Timestamp {
    "2026-11-30T01:12:30Z".parse().unwrap()
}

pub fn exp(v: Value) -> ConcurrencyExperiment {
    serde_json::from_value(v).unwrap()
}

pub fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap()
}
