//! The judge bench (issue 30): traces of real runs, replayed through the operator's judges.
//!
//! - `trace`: what was recorded, and Prometheus's `histogram_quantile` over it.
//! - `pairs`: what the recorder runs side by side.
//! - `readback`: a recording read back from Prometheus, per step.
//! - `replay`: one experiment over a trace, judged per interval (today) or anytime-valid.
//! - `gate`: the capacity gate before each weight step, from the recorded GVL counters.
//! - `bootstrap`: many experiments from one trace, by resampling whole blocks of intervals.
//! - `fixed`: the fixed-horizon test the sequential one is measured against, and its power
//!   analysis.

pub mod bootstrap;
pub mod fixed;
pub mod gate;
pub mod manifest;
pub mod pairs;
pub mod readback;
pub mod replay;
pub mod trace;
