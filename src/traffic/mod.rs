//! Routers: how a stage weight becomes a traffic split.

mod gateway;
mod services;
mod split;

pub use gateway::*;
pub use services::*;
pub use split::*;
