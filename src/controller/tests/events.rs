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
    // 1,000 characters of 2 bytes each are 2,000 bytes: the API would refuse the Event.
    let long = "é".repeat(1500);
    let e = event(EventType::Normal, "Started", &long);
    let note = e.note.clone().unwrap();
    assert!(note.len() <= 1024, "{} bytes", note.len());
    assert!(note.len() >= 1020, "cut too short: {} bytes", note.len());
    assert!(note.ends_with('…'), "{note}");
    assert!(long.starts_with(note.trim_end_matches('…')));
    // Three-byte characters: a cut never splits one.
    let kana = "キ".repeat(400);
    let note = event(EventType::Normal, "Started", &kana).note.unwrap();
    assert!(note.len() <= 1024 && note.chars().all(|c| c == 'キ' || c == '…'));
    let longer = format!("{long}and more");
    assert_eq!(
        event(EventType::Normal, "Started", &longer).action,
        e.action
    );
}
