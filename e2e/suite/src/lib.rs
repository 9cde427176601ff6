//! The end-to-end scenarios' harness: the operator installed by its Helm chart (e2e/run does
//! that) on a real cluster, gvl-sim as the target under open-model load, real Prometheus.
//!
//! A scenario is one `#[tokio::test]` in `tests/`, in its own namespace ([`run`]); it returns
//! an error at its first failed assertion, and [`run`] then prints every experiment's status,
//! its Events and the operator's log tail before failing the test.

mod cluster;
mod experiment;
mod gateway;
mod kubectl;
mod load;
mod operator;
mod progress;
mod prom;
mod rails;
mod receiver;
mod target;

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

pub use cluster::{rolled_out, Ev};
pub use experiment::{from_spec, latency_check, tolerant_check, Exp};
pub use gateway::{route_weights, Routed};
pub use load::{LoadResult, RATE};
pub use progress::Progress;
pub use prom::split_within;
// The operator's own types: the only paths into its crate (besides the Prometheus client in
// prom.rs), so a module rename there is a change here of these lines.
pub use concurrency_operator::api::{
    CapacitySource, CheckResult, ConcurrencyExperiment, ConcurrencyExperimentStatus, MetricNames,
    Phase, SelectionStatus, Verdict,
};
pub use kubectl::{kc, kc_apart, kc_shown, kc_spawn, report_matches_status, Dashboard};
pub use operator::{operator_name, operator_ns};
pub use rails::{postgres_image, rails_app_image, readme_first_experiment, RailsTarget};
pub use receiver::Received;
pub use target::{app_image, reference_app_image, Target};

/// `anyhow::Result`, the scenarios' result.
pub type Result<T = ()> = anyhow::Result<T>;

/// Replicas of the target (the baseline's pods).
pub const REPLICAS: i32 = 3;
/// The in-cluster Prometheus the operator queries (the local cluster's and kind's share it).
pub fn prometheus_in_cluster() -> String {
    env_or("E2E_PROM_IN_CLUSTER", "http://prometheus.monitoring:9090")
}
pub(crate) fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// `[e2e HH:MM:SS] [scenario] message` on stderr (`--nocapture` shows it live; e2e/run reads
/// each scenario's result from its last line).
#[macro_export]
macro_rules! log {
    ($s:expr, $($arg:tt)*) => {
        eprintln!("[e2e {}] [{}] {}", $crate::now_hms(), $s.name, format!($($arg)*))
    };
}
pub fn now_hms() -> String {
    jiff::Timestamp::now().strftime("%H:%M:%S").to_string()
}

/// Fails with `message` unless `cond`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(anyhow::anyhow!($($arg)*));
        }
    };
}

/// The string an enum (or a string) serializes to: status fields compared as the API writes
/// them, whether the operator's type is an enum or a `String`.
pub fn name_of<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => format!("<{e}>"),
    }
}

/// One scenario's namespace and the clients it uses.
pub struct Scenario {
    /// The scenario's name (its test function's, as `e2e/run NAME` calls it).
    pub name: String,
    /// `e2e-NAME`, dashed.
    pub ns: String,
    pub client: Client,
    pub cexps: Api<ConcurrencyExperiment>,
    pub deploys: Api<Deployment>,
    pub pods: Api<Pod>,
    pub prom: prom::Prom,
}

/// Runs scenario `name` in a fresh namespace `e2e-NAME`; on failure prints what explains it
/// and panics.
pub async fn run(name: &str, scenario: impl AsyncFnOnce(&Scenario) -> Result) {
    let t0 = Instant::now();
    let s = match Scenario::new(name).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("[e2e {}] [{name}] FAIL (0 s): setting up: {e:#}", now_hms());
            panic!("{name}: setting up: {e:#}");
        }
    };
    // On the heap: a scenario's future holds the operator's (large) API types across many
    // awaits; on the test thread's stack, `deleted` once overflowed it in a debug build.
    let result = Box::pin(scenario(&s)).await;
    // Load is bounded anyway; stopped so it does not burden the scenarios that follow.
    s.stop_load().await;
    let took = t0.elapsed().as_secs();
    match result {
        Ok(()) => {
            log!(s, "PASS ({took} s)");
            s.remove_namespace().await;
        }
        Err(e) => {
            log!(s, "FAIL ({took} s): {e:#}");
            s.report().await;
            panic!("{name}: {e:#}");
        }
    }
}

impl Scenario {
    async fn new(name: &str) -> Result<Self> {
        Self::in_namespace(name, &format!("e2e-{}", name.replace('_', "-"))).await
    }

    /// `name`'s world in namespace `ns`, made afresh (one there before is deleted first): the
    /// demo's, outside the suite.
    pub async fn in_namespace(name: &str, ns: &str) -> Result<Self> {
        // Both ring and aws-lc-rs are in the tree: rustls cannot pick one by itself. An Err is
        // another test of this binary having installed it first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::try_default()
            .await
            .context("no cluster: KUBECONFIG (e2e/run sets it)")?;
        let url = std::env::var("PROMETHEUS_URL").context("PROMETHEUS_URL is not set")?;
        let s = Scenario {
            name: name.to_string(),
            ns: ns.to_string(),
            cexps: Api::namespaced(client.clone(), ns),
            deploys: Api::namespaced(client.clone(), ns),
            pods: Api::namespaced(client.clone(), ns),
            prom: prom::Prom::new(&url)?,
            client,
        };
        s.fresh_namespace().await?;
        Ok(s)
    }

    pub fn log(&self, msg: impl std::fmt::Display) {
        log!(self, "{msg}");
    }

    /// The experiment, read now.
    pub async fn cexp(&self, name: &str) -> Result<ConcurrencyExperiment> {
        self.cexps
            .get(name)
            .await
            .with_context(|| format!("reading experiment {name}"))
    }

    /// Waits (a watch, not polling) until the experiment satisfies `cond`; the error names
    /// `what` and the experiment's phase and message then.
    pub async fn wait_cexp(
        &self,
        name: &str,
        secs: u64,
        what: &str,
        cond: impl Fn(&ConcurrencyExperiment) -> bool + Send + 'static,
    ) -> Result<ConcurrencyExperiment> {
        match wait_for(self.cexps.clone(), name, secs, what, cond).await {
            Ok(e) => Ok(e),
            Err(e) => {
                let now = self.cexp(name).await.ok();
                Err(e.context(format!("{name} is {}", summary(now.as_ref()))))
            }
        }
    }

    /// Sets annotation `key` on the experiment (a merge patch, as `kubectl annotate`).
    pub async fn annotate(&self, name: &str, key: &str, value: &str) -> Result {
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        self.cexps
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .with_context(|| format!("annotating {name} {key}={value}"))?;
        Ok(())
    }

    /// Waits until the experiment is in `phase`.
    pub async fn wait_phase(
        &self,
        name: &str,
        secs: u64,
        phase: Phase,
    ) -> Result<ConcurrencyExperiment> {
        self.wait_cexp(name, secs, &format!("phase {}", phase.as_str()), move |e| {
            phase_of(e) == Some(phase)
        })
        .await
    }
}

/// Waits (a watch) until object `name` exists and satisfies `cond`.
pub async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    secs: u64,
    what: &str,
    cond: impl Fn(&K) -> bool + Send + 'static,
) -> Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let waited = within(secs, what, async move {
        kube::runtime::wait::await_condition(api, name, move |o: Option<&K>| o.is_some_and(&cond))
            .await
            .map_err(anyhow::Error::from)
    })
    .await?;
    waited.ok_or_else(|| anyhow!("{name} is gone, waiting for: {what}"))
}

/// Asks `check` every second until it answers true, for at most `secs`. Only for what has no
/// object to watch (whether an Event was recorded).
pub async fn eventually(secs: u64, what: &str, check: impl AsyncFn() -> Result<bool>) -> Result {
    within(secs, what, async {
        while !check().await? {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(())
    })
    .await
}

/// Runs `e2e/platform NAME ARGS…`: the cluster-specific step NAME (Prometheus, the gateway)
/// of the cluster `E2E_CLUSTER` names, its output on stderr; fails unless it exits 0 — also
/// when that cluster has no such step.
pub async fn cluster_script(name: &str, args: &[&str]) -> Result {
    let path = platform();
    let status = tokio::process::Command::new(&path)
        .arg(name)
        .args(args)
        .stdout(std::io::stderr())
        .status()
        .await
        .with_context(|| format!("cannot run {path}"))?;
    anyhow::ensure!(
        status.success(),
        "{path} {name} {} failed: {status}",
        args.join(" ")
    );
    Ok(())
}

/// The path of `e2e/platform`, the one door to the cluster-specific steps.
pub fn platform() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../platform").to_string()
}

/// `install_operator ARGS…` of e2e/operator.sh: the Helm chart upgraded with these values
/// (the helm install stays in bash, shared with e2e/run and e2e/demo).
pub async fn install_operator(args: &[&str]) -> Result {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let script =
        "set -euo pipefail; source e2e/lib.sh; source e2e/operator.sh; install_operator \"$@\"";
    let status = tokio::process::Command::new("bash")
        .args(["-c", script, "install_operator"])
        .args(args)
        .current_dir(root)
        .env("ROOT", root)
        .stdout(std::io::stderr())
        .status()
        .await
        .context("running bash")?;
    anyhow::ensure!(
        status.success(),
        "install_operator {} failed: {status}",
        args.join(" ")
    );
    Ok(())
}

/// Runs `fut` for at most `secs`.
pub async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .map_err(|_| anyhow!("timed out after {secs} s waiting for: {what}"))?
}

/// The experiment's status (a default one before the operator wrote any).
pub fn status(e: &ConcurrencyExperiment) -> ConcurrencyExperimentStatus {
    e.status.clone().unwrap_or_default()
}
/// The phase, `None` before the operator picked the experiment up.
pub fn phase_of(e: &ConcurrencyExperiment) -> Option<Phase> {
    e.status.as_ref().map(|s| s.phase)
}
/// `Phase stage=… planned=… effective=… verdict=… failed=… inconclusive=…`.
pub fn summary(e: Option<&ConcurrencyExperiment>) -> String {
    let Some(s) = e.and_then(|e| e.status.as_ref()) else {
        return "without status".into();
    };
    format!(
        "{} stage={} planned={} effective={} verdict={} failed={} inconclusive={}{}",
        s.phase.as_str(),
        s.stage.as_deref().unwrap_or("-"),
        s.planned_weight,
        s.effective_weight,
        s.last_verdict.map(|v| v.as_str()).unwrap_or("-"),
        s.failed_analyses,
        s.inconclusive_analyses,
        s.message
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default(),
    )
}
/// Whether the experiment has condition `type_` with status True (`kubectl wait --for=condition`).
pub fn condition_true(e: &ConcurrencyExperiment, type_: &str) -> bool {
    status(e)
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The message of the apiserver's refusal (what kubectl prints), or the error itself.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Serializes the scenarios of one test binary that must run alone (they measure a traffic
/// split, or stop Prometheus or the operator): held for the whole scenario. A tokio Mutex, as
/// it is held across awaits and every test has its own runtime.
pub async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE_AT_A_TIME.lock().await
}

/// Whether the experiment holds in `phase` for `reason` (`status.holdReason`).
pub fn held(e: &ConcurrencyExperiment, phase: Phase, reason: &str) -> bool {
    let s = status(e);
    s.phase == phase && s.hold_reason.as_ref().is_some_and(|r| name_of(r) == reason)
}

/// `action/reason` of the decision (`-/-` without one).
pub fn decision_of(e: &ConcurrencyExperiment) -> String {
    match status(e).decision {
        Some(d) => format!("{}/{}", name_of(&d.action), name_of(&d.reason)),
        None => "-/-".into(),
    }
}

/// The check that decided a rollback: the first failed check of the last failed analysis, not
/// the first failed check of any (an earlier analysis can hold a check that failed on the
/// candidate alone while the baseline had too few samples, and was Inconclusive for that).
pub fn deciding_check(e: &ConcurrencyExperiment) -> Option<CheckResult> {
    status(e)
        .analyses
        .iter()
        .rev()
        .filter(|a| name_of(&a.verdict) == "Fail")
        .flat_map(|a| a.checks.iter())
        .find(|c| name_of(&c.verdict) == "Fail")
        .cloned()
}
