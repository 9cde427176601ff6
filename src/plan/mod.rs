//! The stage machine: a pure function from (spec, status, observations) to (actions, new
//! status). No I/O here, so every transition is a plain unit test and a restarted operator
//! resumes from status alone.
//!
//! - `step` — one reconcile (see `machine`).
//! - `analysis_due` — whether the shell should run an analysis before calling `step`.

mod analysis;
pub mod conditions;
mod finish;
mod machine;
mod observations;
mod progress;
mod timing;
mod validate;

#[cfg(test)]
mod tests;

pub use analysis::{failing_checks, INCONCLUSIVE_LIMIT, KEPT_ANALYSES};
pub use machine::{candidate_name, step};
pub use observations::*;
pub use progress::{AWAITING_APPROVAL, PAUSED_BY_USER};
pub use timing::{analysis_due, next_analysis_at, POLL, TARGET_POLL};
pub use validate::{validate, Timing};
