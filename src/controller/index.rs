//! The experiments by target Deployment and by phase, kept up to date by the experiment watch
//! (one index per watched scope, like the stores).
//!
//! A Deployment event must wake exactly the experiments that name it, and the phase gauge must
//! not be recounted over every experiment on every reconcile: both were scans over all
//! experiments (O(n) per event, so O(n²) per resync at scale). The watch applies each event
//! here once; lookups are O(experiments on that target).

use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;

use kube::runtime::watcher::Event;
use kube::ResourceExt;

use crate::api::{ConcurrencyExperiment, Phase};

/// `(namespace, name)`.
pub type Key = (String, String);

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    target: String,
    phase: Phase,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    /// `(namespace, target Deployment)` → experiment names.
    by_target: HashMap<Key, BTreeSet<String>>,
    /// A relist in progress: the new contents, swapped in at `InitDone`.
    relist: Option<HashMap<Key, Entry>>,
}

/// What an applied event changed, for the metrics the watch keeps.
#[derive(Debug, Default, PartialEq)]
pub struct Applied {
    /// Experiments that are gone (deleted, or missing from a relist).
    pub removed: Vec<Key>,
    /// The count per phase changed (see `phase_counts`).
    pub phases_changed: bool,
}

#[derive(Debug, Default)]
pub struct ExperimentIndex {
    inner: RwLock<Inner>,
}

fn key(e: &ConcurrencyExperiment) -> Key {
    (e.namespace().unwrap_or_default(), e.name_any())
}

fn entry(e: &ConcurrencyExperiment) -> Entry {
    Entry {
        target: e.spec.target_ref.name.clone(),
        phase: e.status.as_ref().map(|s| s.phase).unwrap_or_default(),
    }
}

impl Inner {
    fn insert(&mut self, k: Key, new: Entry) {
        if let Some(old) = self.entries.get(&k) {
            if old.target == new.target {
                self.entries.insert(k, new);
                return;
            }
            let old = old.target.clone();
            self.unlink(&k, &old);
        }
        self.by_target
            .entry((k.0.clone(), new.target.clone()))
            .or_default()
            .insert(k.1.clone());
        self.entries.insert(k, new);
    }

    fn remove(&mut self, k: &Key) -> bool {
        match self.entries.remove(k) {
            Some(old) => {
                self.unlink(k, &old.target);
                true
            }
            None => false,
        }
    }

    fn unlink(&mut self, k: &Key, target: &str) {
        let t = (k.0.clone(), target.to_string());
        if let Some(names) = self.by_target.get_mut(&t) {
            names.remove(&k.1);
            if names.is_empty() {
                self.by_target.remove(&t);
            }
        }
    }

    fn phase_counts(&self) -> Vec<(Phase, usize)> {
        let mut counts: std::collections::BTreeMap<&'static str, (Phase, usize)> =
            Default::default();
        for e in self.entries.values() {
            counts.entry(e.phase.as_str()).or_insert((e.phase, 0)).1 += 1;
        }
        counts.into_values().collect()
    }
}

impl ExperimentIndex {
    /// Folds one watch event in (after the reflector stored it, before the controller sees it).
    pub fn apply(&self, event: &Event<ConcurrencyExperiment>) -> Applied {
        let mut inner = match self.inner.write() {
            Ok(i) => i,
            Err(poisoned) => poisoned.into_inner(),
        };
        let before = inner.phase_counts();
        let mut applied = Applied::default();
        match event {
            Event::Apply(e) => inner.insert(key(e), entry(e)),
            Event::Delete(e) => {
                let k = key(e);
                if inner.remove(&k) {
                    applied.removed.push(k);
                }
            }
            Event::Init => inner.relist = Some(HashMap::new()),
            Event::InitApply(e) => {
                if let Some(relist) = inner.relist.as_mut() {
                    relist.insert(key(e), entry(e));
                }
            }
            Event::InitDone => {
                let fresh = inner.relist.take().unwrap_or_default();
                let gone: Vec<Key> = inner
                    .entries
                    .keys()
                    .filter(|k| !fresh.contains_key(*k))
                    .cloned()
                    .collect();
                for k in &gone {
                    inner.remove(k);
                }
                for (k, e) in fresh {
                    inner.insert(k, e);
                }
                applied.removed = gone;
            }
        }
        applied.phases_changed = inner.phase_counts() != before || matches!(event, Event::InitDone);
        applied
    }

    /// Experiments per phase (phases without any are left out).
    pub fn phase_counts(&self) -> Vec<(Phase, usize)> {
        match self.inner.read() {
            Ok(i) => i.phase_counts(),
            Err(poisoned) => poisoned.into_inner().phase_counts(),
        }
    }

    /// Names of the experiments in `namespace` whose target is `deployment`.
    pub fn targeting(&self, namespace: &str, deployment: &str) -> Vec<String> {
        let inner = match self.inner.read() {
            Ok(i) => i,
            Err(poisoned) => poisoned.into_inner(),
        };
        inner
            .by_target
            .get(&(namespace.to_string(), deployment.to_string()))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        match self.inner.read() {
            Ok(i) => i.entries.len(),
            Err(poisoned) => poisoned.into_inner().entries.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
