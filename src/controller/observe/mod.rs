//! Observe, the reconcile's first step and its only reads: the experiment's world as the
//! stage machine sees it (`plan::Observations`).
//!
//! - `fetch`: the reads — the target, the candidate and a selection's variants (`variants`)
//!   from the watch caches; the route, Services, ReplicaSets and ConfigMaps from the API; the
//!   candidate's pods (`pods`) only when a decision needs them.
//! - `observations`: what was fetched turned into `plan::Observations` (pure).
//! - `owner`: which objects are the experiment's — the one rule every write and delete goes
//!   through, and the objects by its names it did not make (`not_ours`).
//! - `namespaces`: whether a deleted experiment's namespace is going too.

pub mod fetch;
pub mod namespaces;
pub mod observations;
pub mod owner;
pub mod pods;
pub mod variants;

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::context::{synced, Context};
use super::error::Result;
use crate::api::ConcurrencyExperiment;
use crate::plan::Observations;
use fetch::Fetched;

/// How long observing waits for each cache's first list before giving up for now.
const CACHE_WAIT: Duration = Duration::from_secs(5);

/// What one reconcile saw, at `now`.
pub struct Observed {
    pub fetched: Fetched,
    pub observations: Observations,
    /// The plan's clock, in whole seconds: a time it stores reads back as it was decided, so
    /// a message made from it (a selection's due time) does not change on the next reconcile
    /// and cost a status write.
    pub now: Timestamp,
}

/// Nothing can be observed yet: the named cache (Deployment or HPA) has not had its first
/// full list. An absent target then only means "not listed yet" — deciding would roll back a
/// running experiment as `TargetMissing` right after an operator restart, and split around an
/// HPA as if there were none.
pub struct Unsynced(pub &'static str);

/// Reads everything the stage machine needs for `exp`, and the spec checks that need the
/// operator's configuration (its Prometheus providers, its policy on candidate overrides).
pub async fn observe(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    deleting: bool,
) -> Result<std::result::Result<Observed, Unsynced>> {
    let caches = &ctx.caches;
    if !all_synced(&caches.deployments).await {
        return Ok(Err(Unsynced("Deployment")));
    }
    if !all_synced(&caches.autoscalers).await {
        return Ok(Err(Unsynced("HPA")));
    }
    let fetched = fetch::fetch(&ctx.client, caches, exp).await?;
    let now = Timestamp::now();
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let mut observations = observations::observations(exp, &fetched, now);
    if observations.spec_error.is_none() {
        if let Err(e) = ctx.prometheus.resolve(exp) {
            observations.spec_error = Some(e.to_string());
        }
    }
    if observations.spec_error.is_none() && !ctx.settings.allow_candidate_overrides {
        observations.spec_error = crate::api::policy::forbidden_override(&exp.spec);
    }
    if deleting {
        let ns = exp.namespace().unwrap_or_default();
        observations.namespace_terminating = ctx.namespaces.terminating(&ctx.client, &ns).await;
    }
    Ok(Ok(Observed {
        fetched,
        observations,
        now,
    }))
}

/// Every store has had its first full list, waiting at most `CACHE_WAIT` for each.
async fn all_synced<K>(stores: &[kube::runtime::reflector::Store<K>]) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    for store in stores {
        let ready = tokio::time::timeout(CACHE_WAIT, synced(store)).await;
        if !matches!(ready, Ok(true)) {
            return false;
        }
    }
    true
}
