//! `concurrency-operator drain`: delete every experiment in the watched namespaces and wait
//! until they are gone, so an uninstall never strands traffic on a candidate.
//!
//! Deleting is all this does: the running operator sees each deletion and, through its
//! finalizer, restores the baseline and removes the candidate before the object disappears.
//! Waiting for that is the point — if the operator is not running, nothing is restored, the
//! wait times out and names what is left, and the uninstall stops instead of going ahead.

use std::time::Duration;

use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};

use crate::api::ConcurrencyExperiment;

#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(
        "{} experiment(s) still present after {timeout:?}: {}; is the operator running? (`kubectl get cexp -A` shows what each is doing)",
        left.len(), left.join(", ")
    )]
    Timeout {
        timeout: Duration,
        left: Vec<String>,
    },
}

impl DrainError {
    pub fn category(&self) -> &'static str {
        match self {
            DrainError::Kube(_) => "Kube",
            DrainError::Timeout { .. } => "DrainTimeout",
        }
    }
}

#[derive(Clone, Debug)]
pub struct DrainConfig {
    /// Namespaces to drain; empty means all.
    pub namespaces: Vec<String>,
    /// How long to wait for the experiments to be gone.
    pub timeout: Duration,
    /// How often to look again while waiting.
    pub poll: Duration,
}

/// Deletes every experiment in the configured namespaces and waits until none is left.
/// `progress` receives one line per step, for people watching the hook's log. Returns how
/// many experiments were deleted.
pub async fn drain(
    client: Client,
    config: &DrainConfig,
    mut progress: impl FnMut(&str),
) -> Result<usize, DrainError> {
    let apis: Vec<Api<ConcurrencyExperiment>> = if config.namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        config
            .namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + config.timeout;

    let found = list(&apis).await?;
    if found.is_empty() {
        progress("no experiments to drain");
        return Ok(0);
    }
    progress(&format!(
        "deleting {} experiment(s); the operator restores each baseline before it goes",
        found.len()
    ));
    let mut deleted = delete_new(&client, &found, &mut progress).await?;

    let mut last_report = String::new();
    loop {
        let left = list(&apis).await?;
        if left.is_empty() {
            progress("all experiments are gone");
            return Ok(deleted);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DrainError::Timeout {
                timeout: config.timeout,
                left: left.iter().map(describe).collect(),
            });
        }
        // One created while draining is deleted too, or the wait could never end.
        deleted += delete_new(&client, &left, &mut progress).await?;
        let report = format!(
            "waiting for {}: {}",
            left.len(),
            left.iter().map(describe).collect::<Vec<_>>().join(", ")
        );
        // Only when something changed, so a slow rollback does not flood the log.
        if report != last_report {
            progress(&report);
            last_report = report;
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::sleep(config.poll.min(remaining)).await;
    }
}

async fn list(
    apis: &[Api<ConcurrencyExperiment>],
) -> Result<Vec<ConcurrencyExperiment>, DrainError> {
    let mut all = Vec::new();
    for api in apis {
        all.extend(api.list(&ListParams::default()).await?.items);
    }
    Ok(all)
}

/// Deletes the experiments not yet being deleted; one already gone is not an error.
async fn delete_new(
    client: &Client,
    experiments: &[ConcurrencyExperiment],
    progress: &mut impl FnMut(&str),
) -> Result<usize, DrainError> {
    let mut deleted = 0;
    for exp in experiments
        .iter()
        .filter(|e| e.metadata.deletion_timestamp.is_none())
    {
        let ns = exp.namespace().unwrap_or_default();
        let api: Api<ConcurrencyExperiment> = Api::namespaced(client.clone(), &ns);
        progress(&format!("deleting {}", describe(exp)));
        match api.delete(&exp.name_any(), &DeleteParams::default()).await {
            Ok(_) => deleted += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

/// `shop/storefront-puma-4 (RollingBack, stage 2/3)`.
fn describe(exp: &ConcurrencyExperiment) -> String {
    let status = exp.status.clone().unwrap_or_default();
    let stage = status
        .stage
        .map(|s| format!(", stage {s}"))
        .unwrap_or_default();
    format!(
        "{}/{} ({}{stage})",
        exp.namespace().unwrap_or_default(),
        exp.name_any(),
        status.phase.as_str()
    )
}

#[cfg(test)]
mod tests;
