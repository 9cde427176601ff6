//! Events: a different message is a different Event, a repeated one joins its series.

use kube::runtime::events::EventType;

use crate::controller::events::event;

#[test]
fn two_eliminations_in_a_row_are_two_events_and_a_repeat_is_one() {
    let a = event(
        EventType::Warning,
        "CandidateEliminated",
        "Candidate falcon 1 eliminated",
    );
    let b = event(
        EventType::Warning,
        "CandidateEliminated",
        "Candidate puma 2×5 eliminated",
    );
    let again = event(
        EventType::Warning,
        "CandidateEliminated",
        "Candidate falcon 1 eliminated",
    );
    // The Recorder folds by (type, reason, action): the action is what tells them apart.
    assert_ne!(a.action, b.action);
    assert_eq!(a.action, again.action);
    assert!(a.action.starts_with("Reconcile-") && a.action.len() <= 128);
    assert_eq!(a.note.as_deref(), Some("Candidate falcon 1 eliminated"));
}

#[test]
fn the_note_is_cut_at_the_api_limit_and_the_digest_is_of_what_is_sent() {
    let long = "é".repeat(1500);
    let e = event(EventType::Normal, "Started", &long);
    assert_eq!(e.note.as_ref().map(|n| n.chars().count()), Some(1000));
    let longer = format!("{long}and more");
    assert_eq!(
        event(EventType::Normal, "Started", &longer).action,
        e.action
    );
}
