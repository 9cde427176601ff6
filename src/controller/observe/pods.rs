//! The candidate's pods, read only when a decision needs them: why it is not ready, in one line
//! (not scheduled, a container waiting or crashing) for a missed progress deadline's message;
//! and their resource usage for the HPA's rule at 100 %.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, ResourceExt};

use crate::workload;

/// Pods listed to explain a candidate that is not ready; its pods are at most the target's
/// original replicas, this only bounds a surprise.
const POD_LIST_LIMIT: u32 = 100;
/// Longest pod problem passed on (it ends up in a status message and an Event).
pub(crate) const MAX_PROBLEM: usize = 300;

/// Why the candidate is not ready, from its pods; only listed while it has fewer ready pods
/// than `spec.replicas` (a ready candidate costs no call). Best effort: the answer only goes
/// into messages, so a failed list is reported there rather than failing the reconcile.
pub async fn not_ready_reason(client: &kube::Client, candidate: &Deployment) -> Option<String> {
    let state = workload::rollout_state(candidate);
    if state.ready_replicas >= state.replicas {
        return None;
    }
    let ns = candidate.namespace()?;
    let selector = pod_selector(candidate)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let params = ListParams::default()
        .labels(&selector)
        .limit(POD_LIST_LIMIT);
    match pods.list(&params).await {
        Ok(list) => pod_problem(&list.items),
        Err(e) => {
            tracing::warn!(error = %e, candidate = %candidate.name_any(), "could not list pods");
            Some(format!("its pods could not be listed: {e}"))
        }
    }
}

/// The candidate's app container restarts since `since` (the previous analysis), for the
/// analysis of this interval (`analysis::judge_restarts`): one list per analysis, not per
/// reconcile. `Err` says why the pods could not be read.
pub async fn restarts(
    client: &kube::Client,
    candidate: &Deployment,
    container: &str,
    since: Option<jiff::Timestamp>,
) -> Result<crate::analysis::Restarts, String> {
    let ns = candidate
        .namespace()
        .ok_or("the candidate has no namespace")?;
    let selector = pod_selector(candidate).ok_or("the candidate has no pod selector")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let params = ListParams::default()
        .labels(&selector)
        .limit(POD_LIST_LIMIT);
    match pods.list(&params).await {
        Ok(list) => Ok(crate::analysis::restarts(&list.items, container, since)),
        Err(e) => {
            tracing::warn!(error = %e, candidate = %candidate.name_any(), "could not list pods");
            Err(truncate(&e.to_string(), MAX_PROBLEM))
        }
    }
}

/// The candidate's pods' CPU and memory usage from the resource metrics API (metrics.k8s.io,
/// served by metrics-server where an HPA works), for the HPA's rule at 100 %. Best effort: an
/// error (no metrics API, not yet scraped) is logged and nothing is followed this time.
pub async fn usage(
    client: &kube::Client,
    candidate: &Deployment,
) -> Option<Vec<workload::PodUsage>> {
    let ns = candidate.namespace()?;
    let selector = pod_selector(candidate)?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "PodMetrics"),
        "pods",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let params = ListParams::default()
        .labels(&selector)
        .limit(POD_LIST_LIMIT);
    match api.list(&params).await {
        Ok(list) => Some(
            list.items
                .iter()
                .filter_map(|m| workload::pod_usage(&m.data))
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e, candidate = %candidate.name_any(), "could not read pod metrics");
            None
        }
    }
}

/// `k=v,…` of the Deployment's `matchLabels`; None without any.
fn pod_selector(d: &Deployment) -> Option<String> {
    let labels = d
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .filter(|l| !l.is_empty())?;
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// One line on the first not-ready pod (by name) that says why: not scheduled, or a container
/// waiting (`CrashLoopBackOff`, `ImagePullBackOff`, …) or terminated, with its last exit.
pub fn pod_problem(pods: &[Pod]) -> Option<String> {
    let mut waiting: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !pod_ready(p))
        .collect();
    waiting.sort_by_key(|p| p.name_any());
    let first = waiting.iter().find_map(|p| pod_reason(p))?;
    let line = match waiting.len() {
        1 => first,
        n => format!("{n} candidate pods not ready, e.g. {first}"),
    };
    Some(truncate(&line, MAX_PROBLEM))
}

fn pod_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn pod_reason(pod: &Pod) -> Option<String> {
    let name = pod.name_any();
    let status = pod.status.as_ref()?;
    let unscheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(c) = unscheduled {
        let reason = c.reason.as_deref().unwrap_or("not scheduled");
        return Some(match c.message.as_deref() {
            Some(m) if !m.is_empty() => format!("pod {name}: {reason}: {m}"),
            _ => format!("pod {name}: {reason}"),
        });
    }
    let containers = status.init_container_statuses.iter().flatten();
    let containers = containers.chain(status.container_statuses.iter().flatten());
    containers
        .filter(|c| !c.ready)
        .find_map(container_reason)
        .map(|why| format!("pod {name}: {why}"))
}

fn container_reason(c: &ContainerStatus) -> Option<String> {
    let state = c.state.as_ref();
    let waiting = state.and_then(|s| s.waiting.as_ref());
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let exit = |t: &k8s_openapi::api::core::v1::ContainerStateTerminated| {
        let reason = t.reason.as_deref().unwrap_or("terminated");
        format!("{reason}, exit code {}", t.exit_code)
    };
    let now = match (waiting, terminated) {
        (Some(w), _) => {
            let reason = w.reason.as_deref().unwrap_or("waiting");
            // CrashLoopBackOff's message only repeats the pod name; the last exit says more.
            match w.message.as_deref() {
                Some(m) if !m.is_empty() && reason != "CrashLoopBackOff" => {
                    format!("waiting: {reason} ({m})")
                }
                _ => format!("waiting: {reason}"),
            }
        }
        (None, Some(t)) => format!("terminated: {}", exit(t)),
        // Running but not ready: the readiness probe fails.
        (None, None) if state.and_then(|s| s.running.as_ref()).is_some() => {
            "running but not ready (readiness probe)".to_string()
        }
        (None, None) => return None,
    };
    Some(match last {
        Some(t) => format!("container {} {now} (last terminated: {})", c.name, exit(t)),
        None => format!("container {} {now}", c.name),
    })
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
