//! Anytime-valid tests: verdicts that stay valid however often the operator looks. A fixed
//! threshold checked after every interval (or a fixed-sample test re-run at every look) rolls
//! back a candidate that is no worse more and more often the longer it looks; these e-values
//! exceed `1/α` under their null with probability at most α over the whole experiment, so a
//! clear regression is rolled back at the first analysis with enough evidence, and "no worse"
//! can end a stage early.
//!
//! - `mixture`: the beta-binomial mixture supermartingale (confseq's, with its golden values).
//! - `quantile`: a quantile of candidate vs ρ × baseline from histogram bucket counts.
//! - `rate`: error rates candidate vs ρ × baseline from request and error counts.
//! - `decide`: one check's verdict, reason and evidence from those tests.

pub mod bounds;
pub mod decide;
pub mod mixture;
pub mod quantile;
pub mod rate;

pub use bounds::RatioBounds;
pub use decide::{decide, per_test_alpha, Bounds, Data, N_OPT};
pub use quantile::{count_at, Buckets, Direction, QuantileTest, Resolution};
