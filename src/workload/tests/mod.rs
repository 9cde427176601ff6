mod autoscaler;
mod command;
mod deployment;
mod env;
mod fingerprint;
// Also used by traffic's tests.
pub(crate) mod fixtures;
mod names;
mod patch;
mod render;
mod variants;
