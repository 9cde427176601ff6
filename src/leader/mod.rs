//! Leader election on a `coordination.k8s.io/v1` Lease, so two replicas can run and only one
//! acts. Built on `kube-lease-manager`; this module adds what the operator needs around it:
//! a freely clonable `is_leader` channel, stepping down when renewal cannot be confirmed,
//! the `concurrency_leader` gauge, and releasing the lease on shutdown so the other replica
//! takes over within seconds rather than after the lease expires.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use rand::distr::Alphanumeric;
use rand::RngExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::telemetry::Metrics;

/// Releasing the lease on shutdown must not hold up the process exit for long.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
const MIN_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    /// Unique per replica; see [`default_identity`].
    pub identity: String,
    /// How long a lease stays valid after its last renewal.
    pub lease_duration: Duration,
    /// The holder renews this long before expiry; also the clock skew tolerated between nodes.
    pub renew_grace: Duration,
}

impl LeaderConfig {
    /// 15 s lease renewed 5 s before expiry (the kube-controller-manager defaults are 15 s / 10 s
    /// renew deadline), identity from [`default_identity`].
    pub fn new(namespace: impl Into<String>, lease_name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_grace: Duration::from_secs(5),
        }
    }

    fn params(&self) -> Result<LeaseParams, LeaderError> {
        let duration = self.lease_duration.as_secs();
        let grace = self.renew_grace.as_secs();
        // The Lease API counts whole seconds; a grace of 0 would renew only at expiry.
        if duration < 2 || grace == 0 || grace >= duration {
            return Err(LeaderError::Config(format!(
                "need whole seconds with 0 < renew grace ({grace}s) < lease duration ({duration}s)"
            )));
        }
        if self.identity.is_empty() || self.lease_name.is_empty() || self.namespace.is_empty() {
            return Err(LeaderError::Config(
                "identity, lease name and namespace must not be empty".into(),
            ));
        }
        Ok(LeaseParams::new(self.identity.clone(), duration, grace))
    }
}

/// The pod name (`HOSTNAME`, set by the kubelet) plus a random suffix, so a restarted
/// container with the same pod name never mistakes the old holder's lease for its own.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "concurrency-operator".into());
    let suffix: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(6)
        .map(|c| char::from(c).to_ascii_lowercase())
        .collect();
    format!("{host}-{suffix}")
}

/// A client for the election alone. kube's default read timeout is none, so a renewal
/// stuck on an unresponsive API server would keep this replica "leading" long after its
/// lease expired and the other replica took over. Bounding every call to a quarter of the
/// renew grace makes a renewal (a PATCH and a GET) fail, and this replica step down, before
/// the lease can expire. Retries are left to the election loop, which steps down first.
pub fn lease_client(config: kube::Config, leader: &LeaderConfig) -> Result<Client, LeaderError> {
    Client::try_from(lease_client_config(config, leader)).map_err(LeaderError::Client)
}

pub fn lease_client_config(mut config: kube::Config, leader: &LeaderConfig) -> kube::Config {
    let per_call = (leader.renew_grace / 4).max(Duration::from_millis(500));
    config.connect_timeout = Some(per_call);
    config.write_timeout = Some(per_call);
    config.read_timeout = Some(per_call);
    // Otherwise time a pooled connection sat idle counts against the read timeout.
    config.reset_reader_on_write = true;
    config.default_retry = false;
    config
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("invalid leader election settings: {0}")]
    Config(String),
    #[error("building the leader election client: {0}")]
    Client(#[source] kube::Error),
    #[error("leader election lease: {0}")]
    Lease(#[from] LeaseManagerError),
}

impl LeaderError {
    pub fn category(&self) -> &'static str {
        match self {
            LeaderError::Config(_) => "LeaderConfigInvalid",
            LeaderError::Client(_) => "LeaderClient",
            LeaderError::Lease(_) => "LeaderLease",
        }
    }
}

/// A running election. Dropping it does not stop the election; cancel the token given to
/// [`LeaderElection::start`] and then [`LeaderElection::stopped`].
pub struct LeaderElection {
    is_leader: watch::Receiver<bool>,
    task: JoinHandle<()>,
    identity: String,
}

impl LeaderElection {
    /// Ensures the Lease exists (creating it if needed) and starts contending for it in a
    /// background task. Errors only for bad settings or when the Lease cannot be read or
    /// created at start; later API errors are retried with backoff while not leading.
    pub async fn start(
        client: Client,
        config: LeaderConfig,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Result<Self, LeaderError> {
        let params = config.params()?;
        let manager = new_manager(&client, &config, &params).await?;
        let (tx, is_leader) = watch::channel(false);
        metrics.set_leader(false);
        let identity = config.identity.clone();
        tracing::info!(%identity, lease = %config.lease_name, namespace = %config.namespace, "contending for leadership");
        let task = tokio::spawn(run(client, config, params, manager, tx, metrics, shutdown));
        Ok(Self {
            is_leader,
            task,
            identity,
        })
    }

    /// `true` while this replica holds the lease. Clone freely; every clone sees each change.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.is_leader.clone()
    }

    pub fn is_leader(&self) -> bool {
        *self.is_leader.borrow()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Resolves after shutdown, once leadership is given up and the lease released.
    pub async fn stopped(self) {
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "leader election task failed");
        }
    }
}

async fn new_manager(
    client: &Client,
    config: &LeaderConfig,
    params: &LeaseParams,
) -> Result<LeaseManager, LeaderError> {
    Ok(LeaseManager::new(
        client.clone(),
        config.lease_name.clone(),
        config.namespace.clone(),
        params.clone(),
        LeaseCreateMode::AutoCreate,
    )
    .await?)
}

/// `why` says, for the log, why leadership ends (when `leader` is false).
fn publish(tx: &watch::Sender<bool>, metrics: &Metrics, leader: bool, identity: &str, why: &str) {
    let changed = tx.send_if_modified(|current| std::mem::replace(current, leader) != leader);
    if changed {
        metrics.set_leader(leader);
        if leader {
            tracing::info!(%identity, "acquired leadership");
        } else {
            tracing::warn!(%identity, why, "stepped down as leader");
        }
    }
}

async fn run(
    client: Client,
    config: LeaderConfig,
    params: LeaseParams,
    manager: LeaseManager,
    tx: watch::Sender<bool>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let identity = config.identity.as_str();
    let mut manager = Some(manager);
    let mut retry = MIN_RETRY;
    loop {
        let Some(current) = manager.as_ref() else {
            // Rebuilding re-reads the Lease: if it is still ours, the first `changed()`
            // reports leadership again at once.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                built = new_manager(&client, &config, &params) => match built {
                    Ok(m) => manager = Some(m),
                    Err(err) => {
                        tracing::warn!(error = %err, retry_in = ?retry, "cannot read the leader lease");
                        if sleep_or_cancel(retry, &shutdown).await {
                            return;
                        }
                        retry = (retry * 2).min(MAX_RETRY);
                    }
                },
            }
            continue;
        };
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                // Stop acting first, then free the lease for the other replica.
                publish(&tx, &metrics, false, identity, "shutdown");
                match tokio::time::timeout(RELEASE_TIMEOUT, current.release()).await {
                    Ok(Ok(())) => tracing::info!(%identity, "released the leader lease"),
                    Ok(Err(err)) => tracing::warn!(error = %err, "releasing the leader lease failed; it expires on its own"),
                    Err(_) => tracing::warn!("releasing the leader lease timed out; it expires on its own"),
                }
                return;
            }
            changed = current.changed() => match changed {
                Ok(leader) => {
                    retry = MIN_RETRY;
                    publish(&tx, &metrics, leader, identity, "the lease names another holder");
                }
                Err(err) => {
                    // A failed renewal means we cannot vouch for the lease any more: step
                    // down before it could expire and let a fresh manager find out.
                    tracing::warn!(error = %err, retry_in = ?retry, "leader lease update failed");
                    publish(&tx, &metrics, false, identity, "lease renewal failed");
                    manager = None;
                    if sleep_or_cancel(retry, &shutdown).await {
                        return;
                    }
                    retry = (retry * 2).min(MAX_RETRY);
                }
            },
        }
    }
}

/// Sleeps, returning early with `true` if shutdown was requested.
async fn sleep_or_cancel(duration: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(duration) => false,
    }
}

#[cfg(test)]
mod tests;
