//! The stage machine: a pure function from (spec, status, observations) to (actions, new
//! status). No I/O here, so every transition is a plain unit test and a restarted operator
//! resumes from status alone.

mod observations;

pub use observations::*;
