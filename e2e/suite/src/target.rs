//! The target workload: Deployment `storefront` (gvl-sim as Puma 2×6, or the Ruby reference
//! app on real Puma, scraped by Prometheus) behind Service `storefront`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};

use crate::{env_or, Result, Scenario, REPLICAS};

/// The gvl-sim image the target and the load pods run.
pub fn app_image() -> String {
    env_or("E2E_APP_IMAGE", "gvl-sim:e2e")
}

/// How the target's pods behave.
#[derive(Debug, Clone)]
pub struct Target {
    /// CPU per request (ms) around `io_ms` of I/O; the default is I/O-heavy (seed 003's shape,
    /// scaled down).
    pub cpu_ms: u32,
    pub io_ms: u32,
    /// The container's args (e.g. Puma flags); the image's default without.
    pub args: Option<Vec<String>>,
    pub memory_limit: String,
    pub replicas: i32,
    /// A `preStop` sleep of this many seconds, as pods that must not lose requests on
    /// termination have (gvl-sim exits at SIGTERM): the endpoint is gone from every node's
    /// kube-proxy and the load's connections (re-made every 5 s) have moved before it exits.
    /// Needs to be longer than the slowest endpoint propagation plus a connection's age.
    pub drain_s: Option<u32>,
    /// More environment for the container (e.g. gvl-sim's simulated memory).
    pub env: Vec<(&'static str, String)>,
    /// The container image; gvl-sim's (`app_image`) without.
    pub image: Option<String>,
    /// The port Prometheus scrapes (`prometheus.io/port`); the app port 3000 without.
    pub metrics_port: Option<u16>,
    /// The readiness probe's timeout (s).
    pub probe_timeout_s: u32,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            cpu_ms: 2,
            io_ms: 60,
            args: None,
            memory_limit: "256Mi".into(),
            replicas: REPLICAS,
            drain_s: None,
            env: Vec::new(),
            image: None,
            metrics_port: None,
            probe_timeout_s: 1,
        }
    }
}

/// The Ruby reference app's image (server-images/ruby on Debian's Ruby 3.1 and Puma 5.6),
/// loaded by e2e/images when a `ruby_` scenario runs.
pub fn reference_app_image() -> String {
    env_or("E2E_REFERENCE_APP_IMAGE", "reference-app:e2e")
}

impl Target {
    /// The Ruby reference app as Puma 2×6 exporting yabeda's series names (what
    /// `analysis.metrics.preset: yabeda` reads), scraped on its own metrics port — which
    /// answers while every Puma thread is busy — and with no local delay server (the waits
    /// are sleeps).
    pub fn reference_app() -> Self {
        Target {
            image: Some(reference_app_image()),
            metrics_port: Some(9394),
            memory_limit: "384Mi".into(),
            // Puma answers the probe from its thread pool, like any request. With 1 s, under
            // several scenarios side by side on 2 cores, every pod of a ruby_backlog run
            // timed out at once (the Service had no ready pod); 3 s as many Rails apps set.
            probe_timeout_s: 3,
            // Puma finishes in-flight requests at SIGTERM; the preStop covers the endpoint's
            // removal from kube-proxy and the load's connection age.
            drain_s: Some(8),
            env: vec![
                ("METRICS_NAMES", "yabeda".into()),
                ("METRICS_PORT", "9394".into()),
                ("DELAY_URL", "http://127.0.0.1:9/delay".into()),
            ],
            ..Target::default()
        }
    }
}

impl Scenario {
    /// Creates the target and its Service and waits until it is rolled out.
    pub async fn deploy_target(&self, t: &Target) -> Result {
        let mut container = json!({
            "name": "web",
            "image": t.image.clone().unwrap_or_else(app_image),
            "imagePullPolicy": "Never",
            "ports": [{"name": "http", "containerPort": 3000}],
            "env": [
                {"name": "SERVER", "value": "puma"},
                {"name": "WEB_CONCURRENCY", "value": "2"},
                {"name": "RAILS_MAX_THREADS", "value": "6"},
                {"name": "CPU_MS", "value": t.cpu_ms.to_string()},
                {"name": "IO_MS", "value": t.io_ms.to_string()},
                {"name": "CPU_CLOCK", "value": "wall"},
            ],
            "readinessProbe": {
                "httpGet": {"path": "/healthz", "port": "http"},
                "periodSeconds": 1,
                "timeoutSeconds": t.probe_timeout_s,
            },
            "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi"},
                "limits": {"memory": t.memory_limit},
            },
        });
        if let Some(list) = container["env"].as_array_mut() {
            list.extend(t.env.iter().map(|(k, v)| json!({"name": k, "value": v})));
        }
        if let Some(args) = &t.args {
            container["args"] = json!(args);
        }
        let mut grace = 2;
        if let Some(secs) = t.drain_s {
            container["lifecycle"] = json!({"preStop": {"sleep": {"seconds": secs}}});
            grace = secs + 5;
        }
        let deploy: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "storefront", "labels": {"app": "storefront"}},
            "spec": {
                "replicas": t.replicas,
                "selector": {"matchLabels": {"app": "storefront"}},
                "template": {
                    "metadata": {
                        "labels": {"app": "storefront"},
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": t.metrics_port.unwrap_or(3000).to_string(),
                            "prometheus.io/path": "/metrics",
                        },
                    },
                    "spec": {"terminationGracePeriodSeconds": grace, "containers": [container]},
                },
            },
        }))?;
        self.deploys.create(&PostParams::default(), &deploy).await?;
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "storefront"},
            "spec": {
                "selector": {"app": "storefront"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        }))?;
        Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &svc)
            .await?;
        self.rollout("storefront", 120).await
    }

    /// Creates any namespaced object from its JSON (`kind` and `apiVersion` in it).
    pub async fn create<K>(&self, obj: Value) -> Result<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let obj: K = serde_json::from_value(obj)?;
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.ns);
        Ok(api.create(&PostParams::default(), &obj).await?)
    }

    /// Fails unless the target runs Puma 2×6 again with all its replicas and no candidate.
    pub async fn assert_baseline_restored(&self) -> Result {
        crate::ensure!(
            self.env("storefront", "RAILS_MAX_THREADS").await? == "6",
            "target's threads changed"
        );
        let r = self.replicas("storefront").await?;
        crate::ensure!(
            r == REPLICAS,
            "target's replicas {r}, not restored to {REPLICAS}"
        );
        self.gone("storefront-candidate", 60).await
    }

    /// Fails unless the target has `want` replicas, all rolled out, and no candidate.
    pub async fn assert_target_intact(&self, want: i32) -> Result {
        let r = self.replicas("storefront").await?;
        crate::ensure!(r == want, "target at {r} replicas, not {want}");
        self.rollout("storefront", 90).await?;
        self.gone("storefront-candidate", 60).await
    }
}
