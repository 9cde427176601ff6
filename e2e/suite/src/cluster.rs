//! Namespaces, Deployments, pods, Events and the failure report.

use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodCondition};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, ResourceExt};

use crate::{log, within, Result, Scenario};

/// "type reason: note" of one Event about an experiment.
#[derive(Debug, Clone)]
pub struct Ev {
    pub type_: String,
    pub reason: String,
    pub note: String,
}

/// Rolled out as `kubectl rollout status` means it: the controller saw the newest spec, every
/// replica runs it and is available, and no old pod is left.
pub fn rolled_out(d: Option<&Deployment>) -> bool {
    let Some(d) = d else { return false };
    let (Some(spec), Some(st)) = (&d.spec, &d.status) else {
        return false;
    };
    let want = spec.replicas.unwrap_or(1);
    st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && st.updated_replicas.unwrap_or(0) == want
        && st.replicas.unwrap_or(0) == want
        && st.available_replicas.unwrap_or(0) == want
}

impl Scenario {
    /// Runs `fut` while sampling, every second, the ready pods behind the target's Service
    /// (baseline and candidate); returns its result and the fewest ready pods seen.
    pub async fn min_ready_while<T>(
        &self,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<(T, usize)> {
        let mut min = usize::MAX;
        tokio::pin!(fut);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                out = &mut fut => return Ok((out?, min)),
                _ = tick.tick() => {
                    let pods = self.pods_of("app=storefront").await?;
                    let now = pods.iter().filter(|p| is_ready(p)).count();
                    if now < min && min != usize::MAX {
                        // Which pods, and why: a dip is what a failure message needs to explain.
                        let states: Vec<_> = pods.iter().map(pod_state).collect();
                        self.log(format!("ready pods {now}: {}", states.join(", ")));
                    }
                    min = min.min(now);
                }
            }
        }
    }

    /// Deletes the namespace left by an earlier run (waiting until it is gone) and creates it.
    pub(crate) async fn fresh_namespace(&self) -> Result {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        if let Some(old) = nss.get_opt(&self.ns).await? {
            let uid = old.uid().unwrap_or_default();
            nss.delete(&self.ns, &DeleteParams::default()).await?;
            within(120, "the old namespace gone", async {
                await_condition(nss.clone(), &self.ns, conditions::is_deleted(&uid)).await?;
                Ok(())
            })
            .await?;
        }
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": self.ns}
        }))?;
        nss.create(&PostParams::default(), &ns).await?;
        Ok(())
    }

    /// Deletes the namespace of a scenario that passed, without waiting: its idle pods, their
    /// 1 s readiness probes and Prometheus' scrapes of them would otherwise burden every
    /// scenario after it (by the serial suite's end, 40 idle pods on 2 cores; ruby_promote's
    /// queue time read 75 ms p90 on the baseline). A failed one stays for a look.
    pub(crate) async fn remove_namespace(&self) {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        if let Err(e) = nss.delete(&self.ns, &DeleteParams::background()).await {
            log!(self, "deleting namespace {}: {e:#}", self.ns);
        }
    }

    /// Waits until the Deployment is rolled out ([`rolled_out`]).
    pub async fn rollout(&self, name: &str, secs: u64) -> Result {
        let api = self.deploys.clone();
        within(secs, &format!("deploy/{name} rolled out"), async move {
            await_condition(api, name, rolled_out).await?;
            Ok(())
        })
        .await
    }

    /// Waits until the Deployment does not exist.
    pub async fn gone(&self, name: &str, secs: u64) -> Result {
        let api = self.deploys.clone();
        within(secs, &format!("deploy/{name} gone"), async move {
            await_condition(api, name, |d: Option<&Deployment>| d.is_none()).await?;
            Ok(())
        })
        .await
    }

    pub async fn deploy(&self, name: &str) -> Result<Deployment> {
        self.deploys
            .get(name)
            .await
            .with_context(|| format!("reading deploy/{name}"))
    }

    /// The Deployment's first container.
    pub async fn container(&self, name: &str) -> Result<Container> {
        let d = self.deploy(name).await?;
        d.spec
            .and_then(|s| s.template.spec)
            .and_then(|p| p.containers.into_iter().next())
            .ok_or_else(|| anyhow!("deploy/{name} has no container"))
    }

    /// An env var of the Deployment's first container ("" when unset).
    pub async fn env(&self, deploy: &str, var: &str) -> Result<String> {
        let c = self.container(deploy).await?;
        Ok(c.env
            .unwrap_or_default()
            .into_iter()
            .find(|e| e.name == var)
            .and_then(|e| e.value)
            .unwrap_or_default())
    }

    pub async fn replicas(&self, deploy: &str) -> Result<i32> {
        Ok(self
            .deploy(deploy)
            .await?
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or(1))
    }

    /// The pods matching the label selector.
    pub async fn pods_of(&self, selector: &str) -> Result<Vec<Pod>> {
        let pods = self
            .pods
            .list(&ListParams::default().labels(selector))
            .await?;
        Ok(pods.items)
    }

    /// The experiment's Events (events.k8s.io), oldest first.
    pub async fn events(&self, name: &str) -> Result<Vec<Ev>> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let mut evs: Vec<Event> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("ConcurrencyExperiment")
                        && r.name.as_deref() == Some(name)
                })
            })
            .collect();
        evs.sort_by_key(|e| e.metadata.creation_timestamp.clone());
        Ok(evs
            .into_iter()
            .map(|e| Ev {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                note: e.note.unwrap_or_default(),
            })
            .collect())
    }

    /// How many of the experiment's Events have `reason` (a series counts once: the operator
    /// emits each decision's Event once, and a repeat would be a new Event or a series).
    pub async fn count_events(&self, name: &str, reason: &str) -> Result<usize> {
        Ok(self
            .events(name)
            .await?
            .iter()
            .filter(|e| e.reason == reason)
            .count())
    }

    pub async fn has_event(&self, name: &str, reason: &str) -> Result<bool> {
        Ok(self.count_events(name, reason).await? > 0)
    }

    /// Fails unless the experiment has an Event with `reason` within 15 s: the operator writes
    /// status first and its Events after, so the phase can be seen a moment before them.
    pub async fn expect_event(&self, name: &str, reason: &str) -> Result {
        crate::eventually(15, &format!("{name}: a {reason} Event"), async || {
            self.has_event(name, reason).await
        })
        .await
    }

    /// Fails unless the experiment ends up with exactly one Event with `reason`: waited for
    /// like [`Self::expect_event`] (it follows the status that a scenario saw first — 1 s
    /// after `Succeeded` it was not there yet once), then counted.
    pub async fn expect_event_once(&self, name: &str, reason: &str) -> Result {
        self.expect_event(name, reason).await?;
        let n = self.count_events(name, reason).await?;
        if n != 1 {
            return Err(anyhow!(
                "{n} {reason} Events of {name} (expected exactly 1)"
            ));
        }
        Ok(())
    }

    /// What a failed scenario prints: each experiment's status and Events, the operator's log.
    pub(crate) async fn report(&self) {
        match self.cexps.list(&ListParams::default()).await {
            Ok(list) => {
                for e in list.items {
                    let name = e.name_any();
                    let status = serde_yaml::to_string(&e.status).unwrap_or_default();
                    log!(self, "status of {name}:\n{status}");
                    match self.events(&name).await {
                        Ok(evs) => {
                            let lines: Vec<String> = evs
                                .iter()
                                .map(|e| format!("  {} {}: {}", e.type_, e.reason, e.note))
                                .collect();
                            log!(self, "Events of {name}:\n{}", lines.join("\n"));
                        }
                        Err(e) => log!(self, "Events of {name}: {e:#}"),
                    }
                }
            }
            Err(e) => log!(self, "cannot list the experiments: {e:#}"),
        }
        match self.other_events().await {
            Ok(lines) => log!(self, "other Events in the namespace:\n{}", lines.join("\n")),
            Err(e) => log!(self, "other Events in the namespace: {e:#}"),
        }
        match self.operator_logs(Some(40)).await {
            Ok(tail) => log!(self, "operator log tail:\n{tail}"),
            Err(e) => log!(self, "operator log tail: {e:#}"),
        }
    }

    /// The namespace's Events about anything but experiments (pods scheduled, started, killed,
    /// probes failing; ReplicaSets scaled), the last 60 in time order with their UTC times: the
    /// timeline a failed request's own time (the load's failures) is set beside.
    async fn other_events(&self) -> Result<Vec<String>> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let mut evs: Vec<(jiff::Timestamp, String)> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.kind.as_deref())
                    != Some("ConcurrencyExperiment")
            })
            .filter_map(|e| {
                let at = e
                    .deprecated_last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or_else(|| e.event_time.as_ref().map(|t| t.0))
                    .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
                let what = e.regarding.as_ref().map(|r| {
                    format!(
                        "{}/{}",
                        r.kind.as_deref().unwrap_or("?"),
                        r.name.as_deref().unwrap_or("?")
                    )
                });
                let line = format!(
                    "  {} {} {}: {}",
                    at.strftime("%H:%M:%S"),
                    what.unwrap_or_default(),
                    e.reason.as_deref().unwrap_or(""),
                    e.note.as_deref().unwrap_or("")
                );
                Some((at, line))
            })
            .collect();
        evs.sort_by_key(|(at, _)| *at);
        let skip = evs.len().saturating_sub(60);
        Ok(evs.into_iter().skip(skip).map(|(_, line)| line).collect())
    }
}

/// The pod's Ready condition, if the kubelet has set one.
fn ready_condition(p: &Pod) -> Option<&PodCondition> {
    let conds = p.status.as_ref().and_then(|s| s.conditions.as_ref())?;
    conds.iter().find(|c| c.type_ == "Ready")
}

/// Ready and not being deleted: a pod behind the Service.
pub fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && ready_condition(p).is_some_and(|c| c.status == "True")
}

/// `name ready|not ready (reason)[, deleting]`: why a pod is or is not behind the Service.
pub fn pod_state(p: &Pod) -> String {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let deleting = if p.metadata.deletion_timestamp.is_some() {
        ", deleting"
    } else {
        ""
    };
    match ready_condition(p) {
        Some(c) if c.status == "True" => format!("{name} ready{deleting}"),
        Some(c) => format!(
            "{name} not ready ({}){deleting}",
            c.reason.as_deref().unwrap_or("-")
        ),
        None => format!("{name} no Ready condition{deleting}"),
    }
}
