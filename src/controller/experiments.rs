//! The experiment watch, tolerant of objects that do not parse.
//!
//! A typed watcher deserializes the whole list at once, so one experiment the operator cannot
//! read (written under an older or newer schema, say) would fail every relist and stop
//! reconciliation of all the others. Experiments are therefore watched as dynamic objects and
//! parsed one by one; one that does not parse is logged and skipped.

use std::sync::Arc;

use futures::{future, Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};

use super::index::ExperimentIndex;
use crate::api::ConcurrencyExperiment;
use crate::telemetry::Metrics;

type Watched<K> = Result<Event<K>, watcher::Error>;

/// The store of experiments and the stream of changed ones, for `Controller::for_stream`.
/// Each event also updates `index` (targets, phases; `all` holds every scope's index, for the
/// phase gauge) and drops the metric series of
/// experiments that are gone, so no reconcile has to scan all experiments for either.
pub fn watch(
    client: &Client,
    namespace: Option<&str>,
    index: Arc<ExperimentIndex>,
    all: Arc<Vec<Arc<ExperimentIndex>>>,
    metrics: Metrics,
) -> (
    Store<ConcurrencyExperiment>,
    impl Stream<Item = Result<ConcurrencyExperiment, watcher::Error>> + Send + 'static,
) {
    let resource = ApiResource::erase::<ConcurrencyExperiment>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let (reader, writer) = reflector::store();
    let events = watcher(api)
        .default_backoff()
        .filter_map(|event| future::ready(typed(event)))
        .inspect(move |event| {
            if let Ok(event) = event {
                let applied = index.apply(event);
                for (ns, name) in &applied.removed {
                    metrics.remove_experiment(ns, name);
                }
                if applied.phases_changed {
                    let counts: Vec<_> = all.iter().flat_map(|i| i.phase_counts()).collect();
                    metrics.set_experiment_phases(
                        counts
                            .iter()
                            .flat_map(|(phase, n)| std::iter::repeat_n(*phase, *n)),
                    );
                }
            }
        });
    let changed = reflector::reflector(writer, events).applied_objects();
    (reader, changed)
}

fn watcher(api: Api<DynamicObject>) -> impl Stream<Item = Watched<DynamicObject>> + Send {
    watcher::watcher(api, watcher::Config::default().any_semantic())
}

/// The event with its object parsed; `None` (skip) when the object does not parse.
pub fn typed(event: Watched<DynamicObject>) -> Option<Watched<ConcurrencyExperiment>> {
    let event = match event {
        Ok(e) => e,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(o) => Event::InitApply(parse(o)?),
        Event::Apply(o) => Event::Apply(parse(o)?),
        Event::Delete(o) => Event::Delete(parse(o)?),
    }))
}

fn parse(obj: DynamicObject) -> Option<ConcurrencyExperiment> {
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    match obj.try_parse::<ConcurrencyExperiment>() {
        Ok(exp) => Some(exp),
        Err(error) => {
            tracing::warn!(%namespace, %name, %error, "skipping an experiment that does not parse");
            None
        }
    }
}
