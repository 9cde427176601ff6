//! Rendering the variants: the candidate Deployment from the target and a server config, the
//! baseline read back from the target, and the template promotion writes. Pure functions on
//! k8s-openapi types; the controller does the I/O.

mod autoscaler;
mod baseline;
mod command;
mod deployment;
mod env;
mod error;
mod fingerprint;
mod names;
mod patch;
mod render;

pub use autoscaler::*;
pub use baseline::*;
pub use deployment::*;
pub use env::*;
pub use error::*;
pub use fingerprint::*;
pub use names::*;
pub use patch::*;
pub use render::*;

#[cfg(test)]
pub(crate) mod tests;
