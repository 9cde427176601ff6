//! Leader election against a mocked API (kube's tower-test pattern). The mock answers exactly
//! the calls `kube-lease-manager` makes on one Lease — GET, POST (create), PATCH (apply and
//! strategic merge) — and keeps the Lease as JSON so each test can check what was written.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::leader::*;
use crate::test_api::{json_response, status_response};

const NS: &str = "ops";
const LEASE: &str = "concurrency-operator";
const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

#[derive(Default)]
struct FakeApi {
    lease: Option<Value>,
    /// `GET`, `POST`, `PATCH apply`, `PATCH strategic`, in order.
    calls: Vec<String>,
    fail_next_patch: bool,
}

impl FakeApi {
    fn holder(&self) -> Option<String> {
        let holder = self.lease.as_ref()?.pointer("/spec/holderIdentity")?;
        holder.as_str().map(str::to_owned)
    }

    fn handle(
        &mut self,
        method: &Method,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Response<Body> {
        let item = format!("{PATH}/{LEASE}");
        match (method.clone(), path) {
            (Method::GET, p) if p == item => {
                self.calls.push("GET".into());
                match &self.lease {
                    Some(lease) => json_response(200, lease),
                    None => status_response(404, "NotFound", "NotFound"),
                }
            }
            (Method::POST, PATH) => {
                self.calls.push("POST".into());
                let mut lease: Value = serde_json::from_slice(body).unwrap();
                assert_eq!(lease["metadata"]["name"], LEASE);
                lease["metadata"]["resourceVersion"] = json!("1");
                self.lease = Some(lease.clone());
                json_response(201, &lease)
            }
            (Method::PATCH, p) if p == item => {
                let kind = match content_type {
                    "application/apply-patch+yaml" => "apply",
                    "application/strategic-merge-patch+json" => "strategic",
                    other => panic!("unexpected patch type {other}"),
                };
                self.calls.push(format!("PATCH {kind}"));
                if std::mem::take(&mut self.fail_next_patch) {
                    return status_response(500, "InternalError", "InternalError");
                }
                let patch: Value = serde_json::from_slice(body).unwrap();
                let lease = self.lease.as_mut().expect("patch of a Lease that exists");
                if lease.get("spec").is_none_or(Value::is_null) {
                    lease["spec"] = json!({});
                }
                // Lease spec fields are scalars: both patch kinds set them, null removes.
                for (k, v) in patch["spec"].as_object().unwrap() {
                    let spec = lease["spec"].as_object_mut().unwrap();
                    if v.is_null() {
                        spec.remove(k);
                    } else {
                        spec.insert(k.clone(), v.clone());
                    }
                }
                json_response(200, lease)
            }
            _ => panic!("unexpected call {method} {path}"),
        }
    }
}

/// A client whose every request is answered by `api`.
fn mock_client(api: Arc<Mutex<FakeApi>>) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let content_type = parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let response =
                api.lock()
                    .unwrap()
                    .handle(&parts.method, parts.uri.path(), &content_type, &bytes);
            send.send_response(response);
        }
    });
    Client::new(service, "default")
}

fn lease_held_by(holder: &str, duration_secs: i32) -> Value {
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(LEASE.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            acquire_time: Some(MicroTime(Timestamp::now())),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_duration_seconds: Some(duration_secs),
            lease_transitions: Some(3),
            ..Default::default()
        }),
    };
    serde_json::to_value(lease).unwrap()
}

fn config(identity: &str, duration: u64, grace: u64) -> LeaderConfig {
    LeaderConfig {
        identity: identity.into(),
        lease_duration: Duration::from_secs(duration),
        renew_grace: Duration::from_secs(grace),
        ..LeaderConfig::new(NS, LEASE)
    }
}

async fn wait_for(rx: &mut watch::Receiver<bool>, want: bool, within: Duration) {
    tokio::time::timeout(within, rx.wait_for(|v| *v == want))
        .await
        .unwrap_or_else(|_| panic!("is_leader never became {want}"))
        .unwrap();
}

fn gauge(metrics: &Metrics) -> String {
    metrics
        .encode()
        .lines()
        .find(|l| l.starts_with("concurrency_leader "))
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn creates_free_lease_leads_and_releases_on_shutdown() {
    let api = Arc::new(Mutex::new(FakeApi::default()));
    let metrics = Metrics::new();
    let shutdown = CancellationToken::new();
    let election = LeaderElection::start(
        mock_client(api.clone()),
        config("pod-a-x1", 15, 5),
        metrics.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let mut rx = election.subscribe();
    wait_for(&mut rx, true, Duration::from_secs(5)).await;
    assert!(election.is_leader());
    assert_eq!(gauge(&metrics), "concurrency_leader 1");
    {
        let api = api.lock().unwrap();
        assert_eq!(api.holder().as_deref(), Some("pod-a-x1"));
        let spec = &api.lease.as_ref().unwrap()["spec"];
        assert_eq!(spec["leaseDurationSeconds"], 15);
        assert_eq!(spec["leaseTransitions"], 1);
        assert_eq!(
            api.calls[..3],
            ["GET", "POST", "GET"].map(String::from),
            "{:?}",
            api.calls
        );
        assert!(api.calls.contains(&"PATCH apply".to_string()));
    }

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), election.stopped())
        .await
        .expect("election stops after shutdown");
    assert!(!*rx.borrow());
    assert_eq!(gauge(&metrics), "concurrency_leader 0");
    let api = api.lock().unwrap();
    assert_eq!(api.holder(), None, "lease released for the other replica");
    assert_eq!(api.calls.last().map(String::as_str), Some("GET"));
    assert!(api
        .calls
        .iter()
        .rev()
        .nth(1)
        .is_some_and(|c| c == "PATCH strategic"));
}

#[tokio::test]
async fn follower_waits_and_never_touches_a_live_lease() {
    let api = Arc::new(Mutex::new(FakeApi {
        lease: Some(lease_held_by("pod-b-y2", 15)),
        ..Default::default()
    }));
    let metrics = Metrics::new();
    let shutdown = CancellationToken::new();
    let election = LeaderElection::start(
        mock_client(api.clone()),
        config("pod-a-x1", 15, 5),
        metrics.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!election.is_leader());
    assert_eq!(gauge(&metrics), "concurrency_leader 0");

    shutdown.cancel();
    election.stopped().await;
    let api = api.lock().unwrap();
    assert_eq!(api.holder().as_deref(), Some("pod-b-y2"));
    assert!(
        api.calls.iter().all(|c| c == "GET"),
        "a follower only reads: {:?}",
        api.calls
    );
}

#[tokio::test]
async fn reports_loss_when_another_replica_holds_the_lease_at_renewal() {
    let api = Arc::new(Mutex::new(FakeApi::default()));
    let shutdown = CancellationToken::new();
    let election = LeaderElection::start(
        mock_client(api.clone()),
        config("pod-a-x1", 2, 1),
        Metrics::new(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let mut rx = election.subscribe();
    wait_for(&mut rx, true, Duration::from_secs(5)).await;

    // Another replica took over (e.g. after this one stalled past expiry).
    api.lock().unwrap().lease = Some(lease_held_by("pod-b-y2", 2));
    // Renewal is due one second after acquiring; the re-read shows the other holder.
    wait_for(&mut rx, false, Duration::from_secs(4)).await;

    shutdown.cancel();
    election.stopped().await;
    assert_eq!(api.lock().unwrap().holder().as_deref(), Some("pod-b-y2"));
}

#[tokio::test]
async fn steps_down_on_failed_renewal_then_recovers_its_lease() {
    let api = Arc::new(Mutex::new(FakeApi::default()));
    let shutdown = CancellationToken::new();
    let election = LeaderElection::start(
        mock_client(api.clone()),
        config("pod-a-x1", 3, 2),
        Metrics::new(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let mut rx = election.subscribe();
    wait_for(&mut rx, true, Duration::from_secs(5)).await;

    api.lock().unwrap().fail_next_patch = true;
    wait_for(&mut rx, false, Duration::from_secs(4)).await;
    // The lease still names this replica, so after the retry delay it leads again.
    wait_for(&mut rx, true, Duration::from_secs(5)).await;

    shutdown.cancel();
    election.stopped().await;
    assert_eq!(api.lock().unwrap().holder(), None);
}

#[test]
fn settings_are_checked() {
    assert!(config("a", 15, 5).params().is_ok());
    for (d, g) in [(15, 0), (15, 15), (1, 0), (5, 9)] {
        let err = config("a", d, g).params().unwrap_err();
        assert_eq!(err.category(), "LeaderConfigInvalid");
    }
    assert!(config("", 15, 5).params().is_err());
}

#[test]
fn default_identity_is_pod_name_plus_suffix() {
    let a = default_identity();
    let b = default_identity();
    assert_ne!(a, b);
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "concurrency-operator".into());
    let suffix = a.strip_prefix(&format!("{host}-")).unwrap();
    assert_eq!(suffix.len(), 6);
    assert!(suffix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
}

#[test]
fn lease_client_bounds_every_call_inside_the_grace() {
    let base = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    assert_eq!(
        base.read_timeout, None,
        "kube's default would let a renewal hang"
    );
    let c = lease_client_config(base, &config("a", 15, 5));
    assert_eq!(c.read_timeout, Some(Duration::from_millis(1250)));
    assert_eq!(c.write_timeout, Some(Duration::from_millis(1250)));
    assert_eq!(c.connect_timeout, Some(Duration::from_millis(1250)));
    assert!(c.reset_reader_on_write);
    assert!(!c.default_retry);
}

#[tokio::test]
async fn a_hung_api_server_fails_the_call_instead_of_blocking() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    crate::telemetry::install_crypto_provider();
    let leader = config("pod-a-x1", 3, 2);
    let base = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = lease_client(base, &leader).unwrap();
    let started = tokio::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        LeaderElection::start(client, leader, Metrics::new(), CancellationToken::new()),
    )
    .await
    .expect("bounded by the client timeouts");
    let err = result.err().expect("no answer is an error");
    assert_eq!(err.category(), "LeaderLease");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
