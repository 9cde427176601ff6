use kube::runtime::watcher::Event;

use super::fixtures::experiment;
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus, Phase};
use crate::controller::index::*;

fn named(name: &str, target: &str, phase: Phase) -> ConcurrencyExperiment {
    let mut e = experiment();
    e.metadata.name = Some(name.into());
    e.spec.target_ref.name = target.into();
    e.status = Some(ConcurrencyExperimentStatus {
        phase,
        ..Default::default()
    });
    e
}

fn count(index: &ExperimentIndex, phase: Phase) -> usize {
    index
        .phase_counts()
        .iter()
        .find(|(q, _)| *q == phase)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn a_deployment_finds_exactly_the_experiments_that_name_it() {
    let index = ExperimentIndex::default();
    index.apply(&Event::Apply(named("a", "storefront", Phase::Pending)));
    index.apply(&Event::Apply(named("b", "storefront", Phase::Pending)));
    index.apply(&Event::Apply(named("c", "checkout", Phase::Pending)));
    let ns = experiment().metadata.namespace.unwrap();
    assert_eq!(index.targeting(&ns, "storefront"), ["a", "b"]);
    assert_eq!(index.targeting(&ns, "checkout"), ["c"]);
    assert!(index.targeting("elsewhere", "storefront").is_empty());
    // Retargeted (a spec edit the schema refuses, but the index must not keep a stale link).
    index.apply(&Event::Apply(named("b", "checkout", Phase::Pending)));
    assert_eq!(index.targeting(&ns, "storefront"), ["a"]);
    assert_eq!(index.targeting(&ns, "checkout"), ["b", "c"]);
    let applied = index.apply(&Event::Delete(named("a", "storefront", Phase::Pending)));
    assert_eq!(applied.removed, [(ns.clone(), "a".to_string())]);
    assert!(index.targeting(&ns, "storefront").is_empty());
    assert_eq!(index.len(), 2);
}

#[test]
fn phase_counts_are_reported_only_when_they_change() {
    let index = ExperimentIndex::default();
    let a = index.apply(&Event::Apply(named("a", "t", Phase::Pending)));
    assert!(a.phases_changed);
    assert_eq!(count(&index, Phase::Pending), 1);
    // A status write that keeps the phase changes no count.
    let same = index.apply(&Event::Apply(named("a", "t", Phase::Pending)));
    assert!(!same.phases_changed);
    let moved = index.apply(&Event::Apply(named("a", "t", Phase::Progressing)));
    assert!(moved.phases_changed);
    assert_eq!(count(&index, Phase::Pending), 0);
    assert_eq!(count(&index, Phase::Progressing), 1);
}

#[test]
fn a_relist_replaces_the_contents_and_reports_who_vanished() {
    let index = ExperimentIndex::default();
    index.apply(&Event::Apply(named("old", "t", Phase::Succeeded)));
    index.apply(&Event::Apply(named("kept", "t", Phase::Progressing)));
    index.apply(&Event::Init);
    index.apply(&Event::InitApply(named("kept", "t", Phase::Progressing)));
    index.apply(&Event::InitApply(named("new", "u", Phase::Pending)));
    // Until the relist is done the old contents answer.
    let ns = experiment().metadata.namespace.unwrap();
    assert_eq!(index.targeting(&ns, "t"), ["kept", "old"]);
    let done = index.apply(&Event::InitDone);
    assert_eq!(done.removed, [(ns.clone(), "old".to_string())]);
    assert_eq!(index.targeting(&ns, "t"), ["kept"]);
    assert_eq!(index.targeting(&ns, "u"), ["new"]);
    assert!(done.phases_changed);
    assert_eq!(count(&index, Phase::Succeeded), 0);
    assert_eq!(count(&index, Phase::Pending), 1);
}
