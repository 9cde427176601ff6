//! The one way the operator builds a Kubernetes Event.
//!
//! kube's `Recorder` folds an Event into the previous one of the same object, type, reason
//! and action for 6 minutes, keeping the *first* note: two eliminations, two stage advances or
//! two different errors in a row would show the first message twice and lose the second. The
//! action therefore carries a short digest of the note, so only truly repeated messages
//! become a series (`kubectl describe` shows reason and message, not the action).

use kube::runtime::events::{Event, EventType};

use crate::api::{truncate, EVENT_NOTE_BYTES};

pub fn event(type_: EventType, reason: &str, note: &str) -> Event {
    // The API refuses (and the recorder drops) a note over 1 KiB: cut by bytes, not chars.
    let note = truncate(note, EVENT_NOTE_BYTES);
    Event {
        type_,
        reason: reason.to_string(),
        action: format!("Reconcile-{:08x}", fnv1a(&note)),
        note: Some(note),
        secondary: None,
    }
}

/// FNV-1a, 32 bits: stable across Rust versions and operator restarts (an upgraded operator
/// keeps folding the same repeated message into the same series).
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
