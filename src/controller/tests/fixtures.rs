//! Test fixtures: objects as the API server would return them, and a recording fake API
//! server behind kube's mocked service (tower-test), so tests assert the exact calls made.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::client::Body;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector;
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::api::{ConcurrencyExperiment, Phase};
use crate::controller::context::{Caches, Context, Settings, FINALIZER};
use crate::controller::deployments::{self, FullCopies};
use crate::controller::index::ExperimentIndex;
use crate::controller::reconcile::reconcile;
use crate::notify::deliver::Notifier;
use crate::telemetry::Metrics;

pub const NS: &str = "shop";
pub const EXP_UID: &str = "5a1e0c2e-0000-4000-8000-000000000001";
pub const TARGET_UID: &str = "5a1e0c2e-0000-4000-8000-000000000002";

/// `storefront-puma-4`: storefront from puma 2×6 to puma 2×4, replicas router, default stages.
pub fn experiment() -> ConcurrencyExperiment {
    serde_json::from_value(json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {
            "name": "storefront-puma-4", "namespace": NS, "uid": EXP_UID,
            "generation": 1, "resourceVersion": "100",
            "creationTimestamp": "2026-11-30T01:00:00Z",
        },
        "spec": {
            "targetRef": {"name": "storefront"},
            "container": "web",
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "checks": [{"metric": "latency", "quantile": 0.99, "maxIncrease": "10%"}],
            },
        },
    }))
    .unwrap()
}

/// The experiment once it has written the user's target or route: finalizer in place.
pub fn with_finalizer(mut exp: ConcurrencyExperiment) -> ConcurrencyExperiment {
    exp.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    exp
}

/// The target: 6 ready pods of puma 2×6.
pub fn target(replicas: i32, ready: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "storefront", "namespace": NS, "uid": TARGET_UID,
            "generation": 3, "resourceVersion": "200",
            "annotations": {"deployment.kubernetes.io/revision": "2"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "storefront"}},
            "template": {
                "metadata": {"labels": {"app": "storefront"}},
                "spec": {"containers": [{
                    "name": "web", "image": "registry.example/storefront:1.4",
                    "env": [
                        {"name": "WEB_CONCURRENCY", "value": "2"},
                        {"name": "RAILS_MAX_THREADS", "value": "6"},
                    ],
                }]},
            },
        },
        "status": {
            "observedGeneration": 3, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": ready, "availableReplicas": ready,
        },
    }))
    .unwrap()
}

/// The experiment with the gatewayAPI router on HTTPRoute `storefront`.
pub fn gateway_experiment() -> ConcurrencyExperiment {
    let mut exp = with_finalizer(experiment());
    exp.spec.traffic =
        serde_json::from_value(json!({"router": "gatewayAPI", "httpRoute": "storefront"})).unwrap();
    exp
}

/// The route, the user's Service and the target's current ReplicaSet, stored in `fake`.
pub fn gateway_objects(fake: FakeApi) -> FakeApi {
    fake.with(ROUTE, json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "storefront", "namespace": NS, "resourceVersion": "50"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "storefront", "port": 80}]}]},
    }))
    .with(&format!("{SERVICES}/storefront"), json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "storefront", "namespace": NS},
        "spec": {"selector": {"app": "storefront"}, "ports": [{"port": 80, "targetPort": 3000}]},
    }))
    .with(&format!("{REPLICA_SETS}/storefront-7d9f8b6c5d"), json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": "storefront-7d9f8b6c5d", "namespace": NS,
            "labels": {"app": "storefront", "pod-template-hash": "7d9f8b6c5d"},
            "annotations": {"deployment.kubernetes.io/revision": "2"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "storefront",
                                 "uid": TARGET_UID, "controller": true}],
        },
    }))
}

/// One reconcile of the experiment as currently stored in the fake.
pub async fn reconcile_stored(fake: &FakeApi) -> Result<Requeue, crate::controller::Error> {
    let exp: ConcurrencyExperiment = fake.get(EXP).expect("experiment stored");
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    let result = reconcile(Arc::new(exp), ctx).await;
    server.abort();
    result
}

pub fn stored_phase(fake: &FakeApi) -> Phase {
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.status.unwrap_or_default().phase
}

/// What the Deployment controller would report once `ready` pods of `path` are up.
pub fn set_ready(fake: &FakeApi, path: &str, ready: i32) {
    let mut d: Deployment = fake.get(path).unwrap();
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let generation = d.metadata.generation.unwrap_or(1);
    d.metadata.generation = Some(generation);
    d.status = Some(
        serde_json::from_value(json!({
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": ready, "availableReplicas": ready,
        }))
        .unwrap(),
    );
    fake.put(path, d);
}

/// Stage 1 in force: 2 candidate pods ready, the target shrunk from 6 to its 4 ready pods
/// (the finalizer taken on the way, before that first write to the target).
pub async fn at_stage_one_with_the_baseline_short() -> FakeApi {
    let fake = FakeApi::default()
        .with(EXP, experiment())
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, TARGET, 4);
    fake
}

/// One request as the fake API server saw it.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    /// Path and query, e.g. `/apis/apps/v1/namespaces/shop/deployments/storefront`.
    pub uri: String,
    pub content_type: Option<String>,
    pub body: Value,
}

impl Call {
    /// `METHOD path` without the query, for comparing call sequences.
    pub fn line(&self) -> String {
        let path = self.uri.split('?').next().unwrap_or_default();
        format!("{} {}", self.method, path)
    }
    /// The query parameters, sorted.
    pub fn query(&self) -> Vec<String> {
        let q = self.uri.split_once('?').map(|(_, q)| q).unwrap_or_default();
        let mut params: Vec<String> = q
            .split('&')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        params.sort();
        params
    }
}

/// A small stateful fake API server keyed by object path: GET and DELETE (404 when absent; a
/// delete whose `preconditions.uid` is not the object's is a 409), server-side apply stores the
/// body (a new object gets a UID, an existing one keeps its own; a body naming another UID is a
/// 422, as `metadata.uid` is immutable), JSON patches and merge patches are applied (a merge
/// patch carrying a stale `metadata.resourceVersion` is a 409), POST (Events) is accepted.
/// Every call is recorded in order.
#[derive(Clone)]
pub struct FakeApi {
    pub objects: Arc<Mutex<BTreeMap<String, Value>>>,
    pub calls: Arc<Mutex<Vec<Call>>>,
    pub(super) version: Arc<std::sync::atomic::AtomicU64>,
    /// Shared by every Context made from this fake, so tests can read what was recorded.
    pub metrics: Metrics,
    /// Given to every Context made from this fake (sends nothing by default).
    pub notifier: Notifier,
    /// Services whose EndpointSlices have no ready endpoint (see `endpoints`).
    pub without_endpoints: Arc<Mutex<Vec<String>>>,
    /// `Settings::preflight` of the Contexts made from this fake (off unless a test asks).
    pub preflight: bool,
    /// `Settings::allow_candidate_overrides` of those Contexts (on, as the operator's default).
    pub forbid_overrides: bool,
    /// Deployments (paths) the cache holds metadata-only whatever the index says: their last
    /// event came before their experiment's.
    pub metadata_only: Arc<Mutex<Vec<String>>>,
    /// `Settings::prometheus` of those Contexts: the operator's providers (none by default).
    pub prometheus: crate::prometheus::ProvidersConfig,
    /// The whole copies fetched for metadata-only entries, shared by every Context made from
    /// this fake as the operator's one cache is by its reconciles.
    pub full: Arc<FullCopies>,
}

impl Default for FakeApi {
    fn default() -> Self {
        Self {
            objects: Default::default(),
            calls: Default::default(),
            version: Arc::new(1000.into()),
            metrics: Metrics::new(),
            notifier: Notifier::default(),
            without_endpoints: Default::default(),
            preflight: false,
            forbid_overrides: false,
            metadata_only: Default::default(),
            prometheus: Default::default(),
            full: Default::default(),
        }
    }
}

pub const EXP: &str =
    "/apis/concurrency.dev/v1alpha1/namespaces/shop/concurrencyexperiments/storefront-puma-4";
pub const TARGET: &str = "/apis/apps/v1/namespaces/shop/deployments/storefront";
pub const CANDIDATE: &str = "/apis/apps/v1/namespaces/shop/deployments/storefront-candidate";
pub const ROUTE: &str = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/storefront";
pub const SERVICES: &str = "/api/v1/namespaces/shop/services";
pub const REPLICA_SETS: &str = "/apis/apps/v1/namespaces/shop/replicasets";
pub const PODS: &str = "/api/v1/namespaces/shop/pods";
pub const NAMESPACE: &str = "/api/v1/namespaces/shop";
pub const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

impl FakeApi {
    pub fn with(self, path: &str, obj: impl serde::Serialize) -> Self {
        self.put(path, obj);
        self
    }

    /// The stored object at `path`, as its type.
    pub fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Option<T> {
        let obj = self.objects.lock().unwrap().get(path).cloned()?;
        Some(serde_json::from_value(obj).unwrap())
    }

    pub fn put(&self, path: &str, obj: impl serde::Serialize) {
        self.objects
            .lock()
            .unwrap()
            .insert(path.to_string(), serde_json::to_value(obj).unwrap());
    }

    pub fn remove(&self, path: &str) {
        self.objects.lock().unwrap().remove(path);
    }

    pub fn clear_calls(&self) {
        self.calls.lock().unwrap().clear();
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls other than Event creation, as `METHOD path` lines.
    pub fn lines(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| !c.uri.starts_with(EVENTS))
            .map(Call::line)
            .collect()
    }

    /// Reasons of the Events published, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| c.uri.starts_with(EVENTS))
            .map(|c| c.body["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A Context whose client talks to this fake; `experiments` fill the controller cache, and
    /// the Deployment cache holds the fake's Deployments as they are now (as the watch would).
    pub fn context(&self, experiments: &[ConcurrencyExperiment]) -> (Arc<Context>, JoinHandle<()>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        let server = tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let response = fake.answer(request).await;
                send.send_response(response);
            }
        });
        let (store, mut writer) = reflector::store::<ConcurrencyExperiment>();
        let index = Arc::new(ExperimentIndex::default());
        for event in [watcher::Event::Init]
            .into_iter()
            .chain(experiments.iter().cloned().map(watcher::Event::InitApply))
            .chain([watcher::Event::InitDone])
        {
            writer.apply_watcher_event(&event);
            index.apply(&event);
        }
        // The Deployment cache as the watch would hold it now: every stored Deployment, kept
        // whole or metadata-only as the watch decides (`metadata_only` forces the latter).
        let (deployments, mut dwriter) = reflector::store::<Deployment>();
        dwriter.apply_watcher_event(&watcher::Event::Init);
        let forced = self.metadata_only.lock().unwrap().clone();
        for (path, obj) in self.objects.lock().unwrap().iter() {
            if path.contains("/deployments/") {
                let mut d: Deployment = serde_json::from_value(obj.clone()).unwrap();
                let whole = deployments::kept_whole(&index, &d) && !forced.contains(path);
                deployments::slim(&mut d, whole);
                dwriter.apply_watcher_event(&watcher::Event::InitApply(d));
            }
        }
        dwriter.apply_watcher_event(&watcher::Event::InitDone);
        let (autoscalers, mut hwriter) = reflector::store::<HorizontalPodAutoscaler>();
        hwriter.apply_watcher_event(&watcher::Event::Init);
        for (path, obj) in self.objects.lock().unwrap().iter() {
            if path.contains("/horizontalpodautoscalers/") {
                let h: HorizontalPodAutoscaler = serde_json::from_value(obj.clone()).unwrap();
                hwriter.apply_watcher_event(&watcher::Event::InitApply(h));
            }
        }
        hwriter.apply_watcher_event(&watcher::Event::InitDone);
        let client = Client::new(service, NS);
        let caches = Caches {
            experiments: vec![store],
            deployments: vec![deployments],
            autoscalers: vec![autoscalers],
            indexes: vec![index],
            full: self.full.clone(),
        };
        // The pre-flight lookup needs a Prometheus; its own tests (`preflight`) turn it on.
        let settings = Settings {
            preflight: self.preflight,
            allow_candidate_overrides: !self.forbid_overrides,
            prometheus: self.prometheus.clone(),
            ..Settings::default()
        };
        let ctx = Context::new(client, self.metrics.clone(), settings, caches)
            .with_notifier(self.notifier.clone());
        (Arc::new(ctx), server)
    }
}
