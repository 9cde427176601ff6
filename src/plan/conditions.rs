//! Kubernetes conditions derived from the phase, so `kubectl wait --for=condition=Succeeded`
//! (or `RolledBack`) works. `lastTransitionTime` moves only when a condition's status flips.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{ConcurrencyExperimentStatus, Phase};

pub const PROGRESSING: &str = "Progressing";
pub const SUCCEEDED: &str = "Succeeded";
pub const ROLLED_BACK: &str = "RolledBack";
pub const INVALID: &str = "Invalid";
/// Set (`True`) when several analyses in a row had no data at all; `False` once data is back.
/// Not derived from the phase, so `sync` leaves it alone.
pub const NO_DATA: &str = "NoData";

/// Sets all four conditions from the phase. `reason` is the CamelCase why of the current state
/// (e.g. `PausedByUser`, `TargetNotFound`, `CheckFailed`); the message is `status.message`.
pub fn sync(
    status: &mut ConcurrencyExperimentStatus,
    reason: &str,
    generation: i64,
    now: Timestamp,
) {
    let phase = status.phase;
    let message = status.message.clone().unwrap_or_default();
    let progressing = match phase {
        Phase::Selecting | Phase::Progressing | Phase::Promoting | Phase::RollingBack => true,
        Phase::Pending => reason != "TargetNotFound",
        _ => false,
    };
    let wanted = [
        (PROGRESSING, progressing),
        (SUCCEEDED, phase == Phase::Succeeded),
        (ROLLED_BACK, phase == Phase::RolledBack),
        (INVALID, phase == Phase::Invalid),
    ];
    for (type_, on) in wanted {
        set(
            &mut status.conditions,
            type_,
            on,
            reason,
            &message,
            generation,
            now,
        );
    }
}

/// Upserts one condition; the transition time changes only with its status.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    on: bool,
    reason: &str,
    message: &str,
    generation: i64,
    now: Timestamp,
) {
    let status = if on { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.status = status.to_string();
                c.last_transition_time = Time(now);
            }
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = Some(generation);
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: Some(generation),
            last_transition_time: Time(now),
        }),
    }
}

/// The condition of `type_`, if set.
pub fn get<'a>(status: &'a ConcurrencyExperimentStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}
