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
/// The load pod's `--control-port`: `POST /stop` ends it early (through the apiserver's pod
/// proxy, on any cluster).
const CONTROL_PORT: u16 = 9000;

impl Scenario {
    /// Load on the target's Service for `secs` (at most 600, gvl-sim's bound) at `rate`.
    pub async fn start_load(&self, secs: u32, rate: u32) -> Result {
        let ip = self.service_ip().await?;
        self.start_load_to(secs, rate, &format!("http://{ip}"), "/")
            .await
    }

    /// Load on the target's Service at `path` (e.g. one endpoint of the Rails app).
    pub async fn start_load_path(&self, secs: u32, rate: u32, path: &str) -> Result {
        let ip = self.service_ip().await?;
        self.start_load_to(secs, rate, &format!("http://{ip}"), path)
            .await
    }

    /// Load on `base` (http://IP[:PORT]; only that IP is allowed) + `path`; returns once the
    /// load pod runs. kube-proxy picks a pod per connection, so connections are re-made every
    /// E2E_CONNECTION_AGE (as clients behind a load balancer do), or pods added later, the
    /// candidate's, would only see the connections broken by pods going away.
    pub async fn start_load_to(&self, secs: u32, rate: u32, base: &str, path: &str) -> Result {
        let age = env_or("E2E_CONNECTION_AGE", "5s");
        self.start_load_aged(secs, rate, base, path, &age, "5s")
            .await
    }

    /// Load on the target's Service stamped as AWS ALB stamps it: no `X-Request-Start`, only
    /// `X-Amzn-Trace-Id`, whose root id has the arrival second (a one-second clock).
    pub async fn start_alb_load(&self, secs: u32, rate: u32) -> Result {
        let ip = self.service_ip().await?;
        let age = env_or("E2E_CONNECTION_AGE", "5s");
        self.start_load_with(
            secs,
            rate,
            &format!("http://{ip}"),
            "/",
            &age,
            "5s",
            &["--alb-trace-id"],
        )
        .await
    }

    /// Load on the target's Service whose client waits `timeout` (e.g. `15s`) for each answer,
    /// not 5 s: for a scenario that runs a candidate near its capacity on purpose, where a
    /// stall of the node makes an answer slow, not lost. A request sent to a pod that is gone
    /// still fails: refused, reset, or never answered.
    pub async fn start_patient_load(&self, secs: u32, rate: u32, timeout: &str) -> Result {
        let ip = self.service_ip().await?;
        let age = env_or("E2E_CONNECTION_AGE", "5s");
        self.start_load_aged(secs, rate, &format!("http://{ip}"), "/", &age, timeout)
            .await
    }

    /// Load on the target's Service whose connections live `age` (e.g. `30s`): a load
    /// balancer's keep-alive pool, where most requests reach the app on a connection it has
    /// already accepted (Puma counts those in its backlog; it does not accept new ones while
    /// every thread is busy, so those wait in the kernel's accept queue, unseen).
    pub async fn start_kept_load(&self, secs: u32, rate: u32, age: &str) -> Result {
        let ip = self.service_ip().await?;
        self.start_load_aged(secs, rate, &format!("http://{ip}"), "/", age, "5s")
            .await
    }

    async fn service_ip(&self) -> Result<String> {
        let svc = Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .get("storefront")
            .await?;
        svc.spec
            .and_then(|s| s.cluster_ip)
            .ok_or_else(|| anyhow!("Service storefront has no ClusterIP"))
    }

    async fn start_load_aged(
        &self,
        secs: u32,
        rate: u32,
        base: &str,
        path: &str,
        age: &str,
        timeout: &str,
    ) -> Result {
        self.start_load_with(secs, rate, base, path, age, timeout, &[])
            .await
    }

    /// As `start_load_aged`, with more of gvl-sim's `load` flags.
    #[allow(clippy::too_many_arguments)]
    async fn start_load_with(
        &self,
        secs: u32,
        rate: u32,
        base: &str,
        path: &str,
        age: &str,
        timeout: &str,
        flags: &[&str],
    ) -> Result {
        let host = base.split("://").nth(1).unwrap_or(base);
        let ip = host.split([':', '/']).next().unwrap_or(host);
        anyhow::ensure!(secs <= 600, "load for {secs} s: at most 600");
        self.stop_load_and_wait().await?;
        let mut args: Vec<String> = [
            "load",
            "--url",
            &format!("{base}{path}"),
            "--rate",
            &rate.to_string(),
            "--duration",
            &format!("{secs}s"),
            "--connections",
            "64",
            "--timeout",
            timeout,
            "--allow-cidr",
            &format!("{ip}/32"),
            "--json",
            "--max-connection-age",
            age,
            "--control-port",
            &CONTROL_PORT.to_string(),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(flags.iter().map(|f| f.to_string()));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "load"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "load",
                    "image": app_image(),
                    "imagePullPolicy": "Never",
                    "args": args,
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

    /// The load pod is still sending (it did not end before what it was meant to cover).
    pub async fn load_running(&self) -> Result<bool> {
        let pod = self.pods.get("load").await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        Ok(phase == "Running")
    }

    /// Ends the load now (it stops sending and waits for the answers still due) and returns
    /// what it counted; fails if it had already ended on its own.
    pub async fn stop_load_and_count(&self) -> Result<LoadResult> {
        anyhow::ensure!(
            self.load_running().await?,
            "the load ended before it was stopped: its count would not cover the end"
        );
        let path = format!(
            "/api/v1/namespaces/{}/pods/load:{CONTROL_PORT}/proxy/stop",
            self.ns
        );
        let req = http::Request::post(path).body(Vec::new())?;
        let reply = self.client.request_text(req).await?;
        anyhow::ensure!(
            reply.starts_with("stopping"),
            "the load pod answered {reply:?}"
        );
        let result = self.load_result(30).await?;
        anyhow::ensure!(
            result.stopped_early,
            "the load pod was not stopped: {result:?}"
        );
        Ok(result)
    }

    /// Ends the load, says what it counted, and fails if any request failed.
    pub async fn stop_load_no_request_lost(&self) -> Result<LoadResult> {
        let load = self.stop_load_and_count().await?;
        self.log(format!(
            "load: {} answered, {} failed",
            load.answered,
            load.failed()
        ));
        anyhow::ensure!(
            load.failed() == 0,
            "{} of {} requests failed: {load:?}{}",
            load.failed(),
            load.answered + load.failed(),
            load.failures_text()
        );
        Ok(load)
    }

    /// Waits (at most `secs`) for the load pod to finish and returns what it counted: its
    /// own summary (`--json`), the user's view of every request sent.
    pub async fn load_result(&self, secs: u64) -> Result<LoadResult> {
        let pods = self.pods.clone();
        within(secs, "load pod finished", async move {
            let ended = |p: Option<&Pod>| {
                let phase = p.and_then(|p| p.status.as_ref()?.phase.as_deref());
                matches!(phase, Some("Succeeded" | "Failed"))
            };
            await_condition(pods, "load", ended).await?;
            Ok(())
        })
        .await?;
        let log = self.pods.logs("load", &LogParams::default()).await?;
        // The summary is the one JSON object on stdout; stderr lines may come before it.
        let start = log
            .find("\n{")
            .map(|i| i + 1)
            .or_else(|| log.starts_with('{').then_some(0))
            .ok_or_else(|| anyhow!("no JSON summary in the load pod's log: {log}"))?;
        let mut values = serde_json::Deserializer::from_str(&log[start..]).into_iter();
        let summary: LoadResult = values
            .next()
            .ok_or_else(|| anyhow!("empty load summary"))??;
        Ok(summary)
    }

    /// Deletes the load pod (not waiting).
    pub async fn stop_load(&self) {
        let _ = self.pods.delete("load", &DeleteParams::default()).await;
    }
}

/// What the load generator counted (gvl-sim `load --json`; the fields the scenarios use).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LoadResult {
    pub answered: u64,
    /// Connection errors (refused, reset) — requests the user lost.
    pub errors: u64,
    pub timeouts: u64,
    /// Never sent: the client could not keep up with the rate.
    pub unsent: u64,
    /// Answers per HTTP status.
    pub statuses: std::collections::BTreeMap<String, u64>,
    pub last_error: Option<String>,
    /// Ended by a stop request before its planned duration.
    #[serde(default)]
    pub stopped_early: bool,
    /// Answered requests' latency in ms by quantile (`p50` … `p99.9`, `max`).
    #[serde(default)]
    pub latency_ms: std::collections::BTreeMap<String, f64>,
    /// The first failed requests (gvl-sim keeps 20), each with when and where it stopped.
    #[serde(default)]
    pub failures: Vec<LoadFailure>,
}

/// One failed request as the load generator saw it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LoadFailure {
    /// When it was sent (wall clock).
    pub sent_unix_ms: i64,
    /// Seconds from the load's start.
    pub after_s: f64,
    /// `error` or `timeout`.
    pub kind: String,
    /// Where the request got to, on what connection (e.g. `connect, on a connection opened
    /// for it`).
    pub state: String,
    pub error: Option<String>,
}

impl LoadResult {
    /// Requests the user saw fail: errors, timeouts and answers that are not 2xx.
    pub fn failed(&self) -> u64 {
        let not_ok: u64 = self
            .statuses
            .iter()
            .filter(|(s, _)| !s.starts_with('2'))
            .map(|(_, n)| n)
            .sum();
        self.errors + self.timeouts + not_ok
    }

    /// A line per kept failure — when it was sent (UTC, to set beside the namespace's Events
    /// that the failure report logs) and where it stopped — or nothing.
    pub fn failures_text(&self) -> String {
        self.failures
            .iter()
            .map(|f| {
                let at = jiff::Timestamp::from_millisecond(f.sent_unix_ms)
                    .map(|t| t.strftime("%H:%M:%S%.3f").to_string())
                    .unwrap_or_default();
                let error = f.error.as_deref().map(|e| format!(": {e}"));
                format!(
                    "\n  sent {at} (+{:.1} s): {} in {}{}",
                    f.after_s,
                    f.kind,
                    f.state,
                    error.unwrap_or_default()
                )
            })
            .collect()
    }
}
