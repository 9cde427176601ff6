//! Whether an experiment's namespace is being deleted. Asked only for experiments that are
//! being deleted themselves: in a terminating namespace the namespace controller deletes the
//! target, its Services and the route with the experiment, so there is no baseline left to
//! restore and the finalizer is released at once (500 experiments' restores, each a few
//! status writes and an Event the namespace refuses anyway, held a namespace deletion 52 s).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};

/// A namespace seen terminating stays so (it never goes back), but a new one may take its
/// name later: the answer is kept this long.
const KEEP: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct TerminatingNamespaces {
    seen: Mutex<HashMap<String, Instant>>,
}

impl TerminatingNamespaces {
    /// True when `namespace` has a deletion timestamp. Unknown (not found, RBAC denied, the
    /// API down) is false: the experiment then restores its baseline as any deletion does.
    pub async fn terminating(&self, client: &Client, namespace: &str) -> bool {
        if self.remembered(namespace) {
            return true;
        }
        let api: Api<Namespace> = Api::all(client.clone());
        let terminating = match api.get_opt(namespace).await {
            Ok(Some(ns)) => ns.metadata.deletion_timestamp.is_some(),
            Ok(None) => false,
            Err(e) => {
                tracing::debug!(namespace, error = %e, "cannot read the namespace; restoring as usual");
                false
            }
        };
        if terminating {
            if let Ok(mut seen) = self.seen.lock() {
                seen.retain(|_, at| at.elapsed() < KEEP);
                seen.insert(namespace.to_string(), Instant::now());
            }
        }
        terminating
    }

    fn remembered(&self, namespace: &str) -> bool {
        self.seen
            .lock()
            .ok()
            .and_then(|seen| seen.get(namespace).map(|at| at.elapsed() < KEEP))
            .unwrap_or(false)
    }
}
