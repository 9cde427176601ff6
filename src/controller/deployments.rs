//! The Deployment cache: what it keeps of each Deployment in the watched scope, and how a
//! reconcile reads one.
//!
//! The watch sees every Deployment in the scope — in a shared cluster thousands that no
//! experiment will ever touch — so memory must grow with the experiments, not with the
//! cluster (issue 28). The cache keeps whole only the Deployments an experiment made (owned by
//! one: candidates, variants, the fresh baseline) and those an experiment names as its target
//! when the event arrives; of every other Deployment it keeps the metadata that wakes a
//! reconcile and proves ownership (`spec` and `status` dropped: a metadata-only copy).
//!
//! A target can be cached metadata-only: its last event came before its experiment's (the
//! experiment was created afterwards, or the two watches raced). Reading it then costs one GET,
//! kept in `FullCopies` for as long as the cached resourceVersion is the one fetched; the
//! Deployment's next event replaces the cached copy with a whole one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

use super::error::Result;
use super::index::ExperimentIndex;

/// The experiment that made `d`, by its controller owner reference.
pub fn owning_experiment(d: &Deployment) -> Option<&str> {
    d.owner_references()
        .iter()
        .find(|o| {
            o.controller == Some(true)
                && o.kind == "ConcurrencyExperiment"
                && o.api_version.starts_with("concurrency.dev/")
        })
        .map(|o| o.name.as_str())
}

/// Whether the cache keeps `d` whole: the operator made it, or an experiment targets it.
pub fn kept_whole(index: &ExperimentIndex, d: &Deployment) -> bool {
    owning_experiment(d).is_some()
        || !index
            .targeting(&d.namespace().unwrap_or_default(), &d.name_any())
            .is_empty()
}

/// What the cache stores of `d`. Always without `managedFields` and the last-applied
/// annotation (often larger than the rest of a Deployment, and never read); when not
/// `whole`, only the metadata that names it, versions it and says who owns it.
pub fn slim(d: &mut Deployment, whole: bool) {
    if whole {
        d.metadata.managed_fields = None;
        if let Some(a) = d.metadata.annotations.as_mut() {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        return;
    }
    let m = std::mem::take(&mut d.metadata);
    d.metadata = ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        owner_references: m.owner_references,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    };
    d.spec = None;
    d.status = None;
}

/// A metadata-only copy (every Deployment the API returns has a `spec`).
pub fn is_metadata_only(d: &Deployment) -> bool {
    d.spec.is_none()
}

/// Whole Deployments fetched for metadata-only cache entries, by `(namespace, name)`.
#[derive(Debug, Default)]
pub struct FullCopies {
    copies: Mutex<HashMap<(String, String), Arc<Deployment>>>,
}

impl FullCopies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Deployment>>> {
        match self.copies.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The copy fetched at resourceVersion `rv`, if that is the one held.
    fn at(&self, key: &(String, String), rv: Option<&str>) -> Option<Arc<Deployment>> {
        self.lock()
            .get(key)
            .filter(|d| d.metadata.resource_version.as_deref() == rv)
            .cloned()
    }

    /// Keeps `d`, and lets go of every copy the cache no longer needs (its entry is whole now,
    /// or gone): at most one per target read since its last event.
    fn keep(&self, key: (String, String), d: Arc<Deployment>, stores: &[Store<Deployment>]) {
        let mut copies = self.lock();
        copies
            .retain(|(ns, name), _| lookup(stores, ns, name).is_some_and(|c| is_metadata_only(&c)));
        copies.insert(key, d);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lookup(stores: &[Store<Deployment>], namespace: &str, name: &str) -> Option<Arc<Deployment>> {
    let key = ObjectRef::new(name).within(namespace);
    stores.iter().find_map(|s| s.get(&key))
}

/// Deployment `namespace/name` whole, `None` when it does not exist (as far as the watch
/// knows). From the cache; a metadata-only entry is fetched once per resourceVersion.
pub async fn read(
    client: &Client,
    stores: &[Store<Deployment>],
    full: &FullCopies,
    namespace: &str,
    name: &str,
) -> Result<Option<Deployment>> {
    let Some(cached) = lookup(stores, namespace, name) else {
        return Ok(None);
    };
    if !is_metadata_only(&cached) {
        return Ok(Some(cached.as_ref().clone()));
    }
    let key = (namespace.to_string(), name.to_string());
    if let Some(d) = full.at(&key, cached.metadata.resource_version.as_deref()) {
        return Ok(Some(d.as_ref().clone()));
    }
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let Some(mut d) = api.get_opt(name).await? else {
        // Deleted since the cache saw it; its delete event is on the way.
        return Ok(None);
    };
    slim(&mut d, true);
    // Matched by resourceVersion: a copy newer than the cached entry does not match it, so it
    // is fetched again until its event brings the whole object.
    full.keep(key, Arc::new(d.clone()), stores);
    Ok(Some(d))
}
