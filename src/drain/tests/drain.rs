//! `drain` against a mocked API server (kube's tower-test pattern): the exact calls, in order.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};

use crate::drain::*;
use crate::test_api::{api_status, json_response};

const GROUP: &str = "/apis/concurrency.dev/v1alpha1";

fn collection(ns: Option<&str>) -> String {
    match ns {
        Some(ns) => format!("{GROUP}/namespaces/{ns}/concurrencyexperiments"),
        None => format!("{GROUP}/concurrencyexperiments"),
    }
}

fn experiment(ns: &str, name: &str, deleting: bool) -> Value {
    let mut exp = json!({
        "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                     "finalizers": ["concurrency.dev/restore-baseline"]},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "checks": [{"metric": "errorRate", "max": "1%"}],
            },
        },
        "status": {"phase": "Progressing", "stage": "2/3", "plannedWeight": 70, "effectiveWeight": 67},
    });
    if deleting {
        exp["metadata"]["deletionTimestamp"] = json!("2026-11-30T02:00:00Z");
        exp["status"]["phase"] = json!("RollingBack");
    }
    exp
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperimentList",
           "metadata": {"resourceVersion": "7"}, "items": items})
}

/// Answers each `METHOD path` from its queue of replies (the last one repeats) and records
/// every call; a call nobody scripted gets a 500, which fails the drain.
#[derive(Clone, Default)]
struct Mock {
    replies: Arc<Mutex<HashMap<String, VecDeque<Value>>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Mock {
    fn on(self, method: &str, path: &str, replies: Vec<Value>) -> Self {
        self.replies
            .lock()
            .unwrap()
            .insert(format!("{method} {path}"), replies.into());
        self
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn client(&self) -> (Client, tokio::task::JoinHandle<()>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let mock = self.clone();
        let server = tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let path = request.uri().path().to_string();
                let line = format!("{} {path}", request.method());
                mock.calls.lock().unwrap().push(line.clone());
                let reply = {
                    let mut replies = mock.replies.lock().unwrap();
                    replies.get_mut(&line).and_then(|q| {
                        if q.len() > 1 {
                            q.pop_front()
                        } else {
                            q.front().cloned()
                        }
                    })
                };
                let (code, body) = match reply {
                    Some(body) if body["kind"] == "Status" => {
                        (body["code"].as_u64().unwrap_or(500) as u16, body)
                    }
                    Some(body) => (200, body),
                    None => (
                        500,
                        api_status(500, "InternalError", &format!("unscripted {line}")),
                    ),
                };
                send.send_response(json_response(code, &body));
            }
        });
        (Client::new(service, "default"), server)
    }
}

fn config(namespaces: &[&str], timeout_ms: u64) -> DrainConfig {
    DrainConfig {
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        timeout: Duration::from_millis(timeout_ms),
        poll: Duration::from_millis(5),
    }
}

#[tokio::test]
async fn deletes_each_experiment_then_waits_until_the_namespaces_are_empty() {
    let shop = collection(Some("shop"));
    let billing = collection(Some("billing"));
    let mock = Mock::default()
        .on(
            "GET",
            &shop,
            vec![
                // Found: one running, one already being deleted (not deleted again).
                list(vec![
                    experiment("shop", "a", false),
                    experiment("shop", "b", true),
                ]),
                list(vec![
                    experiment("shop", "a", true),
                    experiment("shop", "b", true),
                ]),
                list(vec![experiment("shop", "a", true)]),
                list(vec![]),
            ],
        )
        .on(
            "GET",
            &billing,
            vec![list(vec![experiment("billing", "c", false)]), list(vec![])],
        )
        .on(
            "DELETE",
            &format!("{shop}/a"),
            vec![experiment("shop", "a", true)],
        )
        .on(
            "DELETE",
            &format!("{billing}/c"),
            vec![experiment("billing", "c", true)],
        );
    let (client, server) = mock.client();
    let mut log = Vec::new();
    let deleted = drain(client, &config(&["shop", "billing"], 5_000), |l| {
        log.push(l.to_string())
    })
    .await
    .unwrap();
    server.abort();

    assert_eq!(deleted, 2);
    assert_eq!(
        mock.calls(),
        [
            format!("GET {shop}"),
            format!("GET {billing}"),
            format!("DELETE {shop}/a"),
            format!("DELETE {billing}/c"),
            format!("GET {shop}"),
            format!("GET {billing}"),
            format!("GET {shop}"),
            format!("GET {billing}"),
            format!("GET {shop}"),
            format!("GET {billing}"),
        ]
    );
    assert_eq!(
        log,
        [
            "deleting 3 experiment(s); the operator restores each baseline before it goes",
            "deleting shop/a (Progressing, stage 2/3)",
            "deleting billing/c (Progressing, stage 2/3)",
            "waiting for 2: shop/a (RollingBack, stage 2/3), shop/b (RollingBack, stage 2/3)",
            "waiting for 1: shop/a (RollingBack, stage 2/3)",
            "all experiments are gone",
        ]
    );
}

#[tokio::test]
async fn nothing_to_drain_is_one_list_across_all_namespaces() {
    let all = collection(None);
    let mock = Mock::default().on("GET", &all, vec![list(vec![])]);
    let (client, server) = mock.client();
    let mut log = Vec::new();
    let deleted = drain(client, &config(&[], 5_000), |l| log.push(l.to_string()))
        .await
        .unwrap();
    server.abort();
    assert_eq!(deleted, 0);
    assert_eq!(mock.calls(), [format!("GET {all}")]);
    assert_eq!(log, ["no experiments to drain"]);
}

#[tokio::test]
async fn all_namespaces_delete_through_each_experiments_namespace_and_late_arrivals_too() {
    let all = collection(None);
    let mock = Mock::default()
        .on(
            "GET",
            &all,
            vec![
                list(vec![experiment("shop", "a", false)]),
                // Created while draining: deleted as well.
                list(vec![
                    experiment("shop", "a", true),
                    experiment("staging", "late", false),
                ]),
                list(vec![]),
            ],
        )
        .on(
            "DELETE",
            &format!("{}/a", collection(Some("shop"))),
            vec![experiment("shop", "a", true)],
        )
        .on(
            "DELETE",
            &format!("{}/late", collection(Some("staging"))),
            vec![experiment("staging", "late", true)],
        );
    let (client, server) = mock.client();
    let deleted = drain(client, &config(&[], 5_000), |_| {}).await.unwrap();
    server.abort();
    assert_eq!(deleted, 2);
    assert_eq!(
        mock.calls(),
        [
            format!("GET {all}"),
            format!("DELETE {}/a", collection(Some("shop"))),
            format!("GET {all}"),
            format!("DELETE {}/late", collection(Some("staging"))),
            format!("GET {all}"),
        ]
    );
}

#[tokio::test]
async fn an_experiment_that_never_goes_times_out_by_name() {
    let shop = collection(Some("shop"));
    let mock = Mock::default()
        .on(
            "GET",
            &shop,
            vec![
                list(vec![
                    experiment("shop", "a", false),
                    experiment("shop", "gone", false),
                ]),
                // The operator is not running: the finalizer is never released.
                list(vec![experiment("shop", "a", true)]),
            ],
        )
        .on(
            "DELETE",
            &format!("{shop}/a"),
            vec![experiment("shop", "a", true)],
        )
        // Deleted by someone else between the list and the delete: a 404, not an error.
        .on(
            "DELETE",
            &format!("{shop}/gone"),
            vec![api_status(404, "NotFound", "gone")],
        );
    let (client, server) = mock.client();
    let err = drain(client, &config(&["shop"], 60), |_| {})
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(err.category(), "DrainTimeout");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "1 experiment(s) still present after 60ms: shop/a (RollingBack, stage 2/3);"
        ),
        "{message}"
    );
    let calls = mock.calls();
    assert_eq!(
        calls[..3],
        [
            format!("GET {shop}"),
            format!("DELETE {shop}/a"),
            format!("DELETE {shop}/gone")
        ]
    );
    assert!(calls.len() >= 5, "polled until the deadline: {calls:?}");
    assert!(
        calls[3..].iter().all(|c| *c == format!("GET {shop}")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_api_error_stops_the_drain_with_its_category() {
    let mock = Mock::default();
    let (client, server) = mock.client();
    let err = drain(client, &config(&["shop"], 5_000), |_| {})
        .await
        .unwrap_err();
    server.abort();
    assert_eq!(err.category(), "Kube");
    assert!(err.to_string().contains("unscripted GET"), "{err}");
}
