//! Routers: how a stage weight becomes a traffic split.

mod split;

pub use split::*;
