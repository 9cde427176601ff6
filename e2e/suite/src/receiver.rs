//! A webhook receiver in the scenario's namespace (`gvl-sim receive`: it keeps every POST and
//! lists them at `GET /received`), for the notification sinks to send to; and a "Prometheus"
//! that accepts every connection and never answers in time.

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::PostParams;
use kube::runtime::{conditions, wait::await_condition};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;

use crate::{app_image, within, Result, Scenario};

pub const RECEIVER: &str = "receiver";
const PORT: u16 = 8080;

/// One request the receiver got.
#[derive(Clone, Debug, Deserialize)]
pub struct Received {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: String,
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_lowercase()).map(String::as_str)
    }
    pub fn json(&self) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.body)?)
    }
}

impl Scenario {
    /// Starts the receiver pod and its Service; the first `fail_first` posts to each path are
    /// answered 503 (a sender's retry is then seen as the same delivery twice). Returns the URL base for the sinks.
    pub async fn start_receiver(&self, fail_first: u32) -> Result<String> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": RECEIVER, "labels": {"app": RECEIVER}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": RECEIVER,
                    "image": app_image(),
                    "imagePullPolicy": "Never",
                    "args": ["receive", "--listen", format!("0.0.0.0:{PORT}")],
                    "env": [{"name": "FAIL_FIRST", "value": fail_first.to_string()}],
                    "ports": [{"name": "http", "containerPort": PORT}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": PORT}, "periodSeconds": 1},
                    "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "limits": {"memory": "64Mi"}},
                }],
            },
        }))?;
        self.pods.create(&PostParams::default(), &pod).await?;
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": RECEIVER},
            "spec": {"selector": {"app": RECEIVER}, "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]},
        }))?;
        kube::Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &svc)
            .await?;
        let pods = self.pods.clone();
        within(60, "the receiver pod ready", async move {
            await_condition(pods, RECEIVER, conditions::is_pod_running()).await?;
            Ok(())
        })
        .await?;
        Ok(format!("http://{RECEIVER}.{}.svc:{PORT}", self.ns))
    }

    /// A tenant's Prometheus that hangs: it accepts every connection and never answers (a
    /// Ruby one-liner in the reference app's image, which has Ruby). Returns its URL.
    pub async fn start_hanging_prometheus(&self) -> Result<String> {
        const NAME: &str = "hanging-prometheus";
        let hang = "require 'socket'; s = TCPServer.new(9090); held = []; \
                    loop { held << s.accept }";
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": NAME, "labels": {"app": NAME}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "prometheus",
                    "image": crate::reference_app_image(),
                    "imagePullPolicy": "Never",
                    "command": ["ruby", "-e", hang],
                    "ports": [{"name": "http", "containerPort": 9090}],
                    "readinessProbe": {"tcpSocket": {"port": 9090}, "periodSeconds": 1},
                    "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "limits": {"memory": "128Mi"}},
                }],
            },
        }))?;
        self.pods.create(&PostParams::default(), &pod).await?;
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": NAME},
            "spec": {"selector": {"app": NAME}, "ports": [{"name": "http", "port": 9090, "targetPort": 9090}]},
        }))?;
        kube::Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &svc)
            .await?;
        let pods = self.pods.clone();
        within(60, "the hanging Prometheus pod running", async move {
            await_condition(pods, NAME, conditions::is_pod_running()).await?;
            Ok(())
        })
        .await?;
        Ok(format!("http://{NAME}.{}.svc:9090", self.ns))
    }

    /// Everything the receiver got so far, in arrival order (through the apiserver's proxy).
    pub async fn received(&self) -> Result<Vec<Received>> {
        let path = format!(
            "/api/v1/namespaces/{}/pods/{RECEIVER}:{PORT}/proxy/received",
            self.ns
        );
        let req = http::Request::get(path).body(Vec::new())?;
        let text = self.client.request_text(req).await?;
        Ok(serde_json::from_str(&text)?)
    }
}
