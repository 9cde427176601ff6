//! The operator as e2e/run installed it (Helm release `cop` in `concurrency-system`).

use anyhow::anyhow;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, LogParams};
use kube::runtime::wait::await_condition;
use kube::{Api, ResourceExt};

use crate::{env_or, rolled_out, within, Result, Scenario};

pub fn operator_ns() -> String {
    env_or("E2E_OP_NS", "concurrency-system")
}
/// The Deployment's (and the Lease's) name.
pub fn operator_name() -> String {
    format!("{}-concurrency-operator", env_or("E2E_RELEASE", "cop"))
}
const SELECTOR: &str = "app.kubernetes.io/name=concurrency-operator";

impl Scenario {
    fn op_pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &operator_ns())
    }

    /// Names of the operator's pods.
    pub async fn operator_pods(&self) -> Result<Vec<String>> {
        let pods = self
            .op_pods()
            .list(&ListParams::default().labels(SELECTOR))
            .await?;
        Ok(pods.items.iter().map(|p| p.name_any()).collect())
    }

    /// Every operator pod's log (the last `tail` lines of each), each line prefixed by its pod.
    pub async fn operator_logs(&self, tail: Option<i64>) -> Result<String> {
        let mut out = String::new();
        for pod in self.operator_pods().await? {
            let params = LogParams {
                tail_lines: tail,
                ..LogParams::default()
            };
            let log = self.op_pods().logs(&pod, &params).await?;
            for line in log.lines() {
                out.push_str(&format!("[{pod}] {line}\n"));
            }
        }
        Ok(out)
    }

    /// Fails if the operator's logs show a 403 from the apiserver (other than the one for
    /// writing into a namespace being deleted, which is not a permission).
    pub async fn no_rbac_denials(&self) -> Result {
        let logs = self.operator_logs(None).await?;
        let denied: Vec<&str> = logs
            .lines()
            .filter(|l| {
                let l = l.to_lowercase();
                // Not a bare "403": timestamps carry it (01:58:54.403455Z).
                (l.contains("forbidden") || l.contains("code: 403"))
                    && !l.contains("namespaceterminating")
            })
            .collect();
        crate::ensure!(
            denied.is_empty(),
            "the operator was denied API access:\n{}",
            denied.join("\n")
        );
        Ok(())
    }

    /// Force-deletes the (first) operator pod.
    pub async fn kill_operator(&self, when: &str) -> Result {
        let pod = self
            .operator_pods()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("no operator pod to kill"))?;
        self.log(format!("killing {pod} {when}"));
        self.kill_pod(&pod).await
    }

    pub async fn kill_pod(&self, pod: &str) -> Result {
        self.op_pods()
            .delete(pod, &DeleteParams::default().grace_period(0))
            .await?;
        Ok(())
    }

    /// Waits until the operator's Deployment is rolled out again.
    pub async fn operator_rolled_out(&self, secs: u64) -> Result {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &operator_ns());
        within(secs, "the operator rolled out", async move {
            await_condition(api, &operator_name(), rolled_out).await?;
            Ok(())
        })
        .await
    }

    /// The leader election Lease's holder identity ("<pod name>-<random suffix>").
    pub async fn lease_holder(&self) -> Result<Option<String>> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &operator_ns());
        let lease = api.get(&operator_name()).await?;
        Ok(lease
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    }
}
