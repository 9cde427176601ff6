//! A variant's app container restarts, from its pods: the kills and crashes that the app's own
//! metrics never show (they die with the process) and that readiness only shows as "unready
//! for a while". The analysis of the interval a restart happened in fails on it
//! (`judge_restarts`; docs/experiment-reference.md, "Restarts"), whatever the metrics say.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::ResourceExt;

use crate::api::{CheckResult, Verdict};

use super::evaluate::AnalysisOutcome;
use super::judge::attach_rule;

pub use crate::api::RESTARTS_CHECK;

/// One termination of the app container (or an eviction of its pod).
#[derive(Debug, Clone, PartialEq)]
pub struct Restart {
    pub pod: String,
    /// `OOMKilled`, `Error`, `Evicted`, …
    pub reason: String,
    /// `None` for an evicted pod (no container exit).
    pub exit_code: Option<i32>,
    pub finished_at: Option<Timestamp>,
}

impl Restart {
    /// `pod web-abc: OOMKilled (exit code 137) at 2026-12-04T10:00:00Z`.
    pub fn describe(&self, container: &str) -> String {
        let exit = match self.exit_code {
            Some(code) => format!(" (exit code {code})"),
            None => String::new(),
        };
        let at = match self.finished_at {
            Some(t) => format!(" at {t}"),
            None => String::new(),
        };
        format!(
            "container {container} of pod {}: {}{exit}{at}",
            self.pod, self.reason
        )
    }
}

/// The restarts seen in a variant's pods.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Restarts {
    /// Restarts of the app container over the pods that exist now, plus evicted pods.
    pub total: i32,
    /// Terminations that finished after `since`: each one is a kill or crash during the
    /// interval being judged.
    pub recent: Vec<Restart>,
}

/// The app container's restarts in `pods`. A termination is recent when it finished after
/// `since` (the previous analysis); without `since`, every one is (the candidate's pods were
/// made by the experiment, so all their restarts happened during it). Only the last
/// termination of each container is known (`lastState`): several in one interval count once,
/// and the interval fails on the first anyway.
pub fn restarts(pods: &[Pod], container: &str, since: Option<Timestamp>) -> Restarts {
    let after = |t: Option<Timestamp>| match (since, t) {
        (None, _) => true,
        (Some(s), Some(t)) => t > s,
        // No time on the record: counted, a kill is never hidden for want of a timestamp.
        (Some(_), None) => true,
    };
    let mut out = Restarts::default();
    let mut pods: Vec<&Pod> = pods.iter().collect();
    pods.sort_by_key(|p| p.name_any());
    for pod in pods {
        // A pod being deleted (scale-down, rollout) stops its container on purpose.
        let Some(status) = pod
            .status
            .as_ref()
            .filter(|_| pod.metadata.deletion_timestamp.is_none())
        else {
            continue;
        };
        if status.phase.as_deref() == Some("Failed") {
            // Evicted (memory pressure on the node) or otherwise failed: the whole pod is gone,
            // and its ReplicaSet has made another.
            let at = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0);
            out.total += 1;
            if after(at) {
                out.recent.push(Restart {
                    pod: pod.name_any(),
                    reason: status.reason.clone().unwrap_or_else(|| "Failed".into()),
                    exit_code: None,
                    finished_at: at,
                });
            }
            continue;
        }
        let Some(c) = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == container)
        else {
            continue;
        };
        out.total += c.restart_count.max(0);
        let terminated = |t: &ContainerStateTerminated| Restart {
            pod: pod.name_any(),
            reason: t.reason.clone().unwrap_or_else(|| "terminated".into()),
            exit_code: Some(t.exit_code),
            finished_at: t.finished_at.as_ref().map(|t| t.0),
        };
        // Terminated now (about to be restarted), else the last termination, if any.
        let now = c.state.as_ref().and_then(|s| s.terminated.as_ref());
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        if let Some(t) = now.or(last) {
            let r = terminated(t);
            // A container that never restarted and is not terminated has no last state; one
            // whose restart count is 0 but shows a termination is stopping right now.
            if after(r.finished_at) {
                out.recent.push(r);
            }
        }
    }
    out
}

/// The analysis with the candidate's restarts judged: a `restarts` entry among its checks
/// (the candidate's total restarts as its value) that fails when any happened since the
/// previous analysis — and then the whole analysis fails, even with too few requests (a
/// killed candidate serves few) — unless `fail` is off, when it only records them. `Err` is
/// why the pods could not be read: the entry is Inconclusive, and so is the analysis unless it
/// already failed.
pub fn judge_restarts(
    mut outcome: AnalysisOutcome,
    restarts: Result<Restarts, String>,
    container: &str,
    fail: bool,
) -> AnalysisOutcome {
    let limit = if fail { "no restart" } else { "recorded only" };
    let mut check = CheckResult {
        name: RESTARTS_CHECK.into(),
        baseline: None,
        candidate: None,
        limit: limit.into(),
        verdict: Verdict::Pass,
        reason: None,
        evidence: None,
    };
    match restarts {
        Err(e) => {
            check.verdict = Verdict::Inconclusive;
            check.reason = Some(format!("the candidate's pods could not be read: {e}"));
        }
        Ok(r) => {
            check.candidate = Some(f64::from(r.total));
            let recent: Vec<String> = r.recent.iter().map(|x| x.describe(container)).collect();
            if recent.is_empty() {
                check.reason = Some("no restart since the previous analysis".into());
            } else {
                let why = format!(
                    "the candidate restarted {} time(s) since the previous analysis: {}",
                    recent.len(),
                    recent.join("; ")
                );
                if fail {
                    check.verdict = Verdict::Fail;
                }
                check.reason = Some(why);
            }
        }
    }
    attach_rule(&mut outcome.record, check, fail);
    // Where the value comes from, as status shows each check's query.
    outcome.queries.insert(
        RESTARTS_CHECK.into(),
        "the candidate's pods (Kubernetes API): app container restarts and evictions".into(),
    );
    outcome
}
