//! Open-model load from an in-cluster pod (gvl-sim's `load`), bounded in time and allowed to
//! reach one IP only: the Service's ClusterIP or a gateway's.

use anyhow::anyhow;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::target::app_image;
use crate::{env_or, within, Result, Scenario};

/// The default request rate per second.
pub const RATE: u32 = 30;

impl Scenario {
    /// Load on the target's Service for `secs` (at most 600, gvl-sim's bound) at `rate`.
    pub async fn start_load(&self, secs: u32, rate: u32) -> Result {
        let svc = Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .get("storefront")
            .await?;
        let ip = svc
            .spec
            .and_then(|s| s.cluster_ip)
            .ok_or_else(|| anyhow!("Service storefront has no ClusterIP"))?;
        self.start_load_to(secs, rate, &format!("http://{ip}"), "/")
            .await
    }

    /// Load on `base` (http://IP[:PORT]; only that IP is allowed) + `path`; returns once the
    /// load pod runs. kube-proxy picks a pod per connection, so connections are re-made every
    /// E2E_CONNECTION_AGE (as clients behind a load balancer do), or pods added later, the
    /// candidate's, would only see the connections broken by pods going away.
    pub async fn start_load_to(&self, secs: u32, rate: u32, base: &str, path: &str) -> Result {
        let host = base.split("://").nth(1).unwrap_or(base);
        let ip = host.split([':', '/']).next().unwrap_or(host);
        anyhow::ensure!(secs <= 600, "load for {secs} s: at most 600");
        self.stop_load_and_wait().await?;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "load"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "load",
                    "image": app_image(),
                    "imagePullPolicy": "Never",
                    "args": ["load", "--url", format!("{base}{path}"), "--rate", rate.to_string(),
                             "--duration", format!("{secs}s"), "--connections", "64",
                             "--timeout", "5s", "--allow-cidr", format!("{ip}/32"), "--json",
                             "--max-connection-age", env_or("E2E_CONNECTION_AGE", "5s")],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "128Mi"}},
                }],
            },
        }))?;
        self.pods.create(&PostParams::default(), &pod).await?;
        let pods = self.pods.clone();
        let running = within(60, "load pod running", async move {
            await_condition(pods, "load", conditions::is_pod_running()).await?;
            Ok(())
        })
        .await;
        if let Err(e) = running {
            let logs = self
                .pods
                .logs("load", &LogParams::default())
                .await
                .unwrap_or_default();
            return Err(e.context(format!("load pod log: {logs}")));
        }
        Ok(())
    }

    async fn stop_load_and_wait(&self) -> Result {
        if let Some(old) = self.pods.get_opt("load").await? {
            let uid = old.uid().unwrap_or_default();
            self.pods.delete("load", &DeleteParams::default()).await?;
            let pods = self.pods.clone();
            within(60, "the old load pod gone", async move {
                await_condition(pods, "load", conditions::is_deleted(&uid)).await?;
                Ok(())
            })
            .await?;
        }
        Ok(())
    }

    /// Deletes the load pod (not waiting).
    pub async fn stop_load(&self) {
        let _ = self.pods.delete("load", &DeleteParams::default()).await;
    }
}
