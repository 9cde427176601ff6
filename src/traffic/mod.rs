//! Routers: how a stage weight becomes a traffic split. `Router` (in `router`) answers every
//! question about it; `replicas` and `gateway` are the two routers, `services` the variant
//! Services the gateway router splits between, `split` what their answers are made of.

mod gateway;
mod replicas;
mod router;
mod selection;
mod services;
mod split;

pub use gateway::{
    newly_weighted, restore_route_patch, route_backend_refs, route_services, route_shares,
    route_weight, split_route_patch, HTTPROUTE_API_VERSION,
};
pub use router::Router;
pub use selection::{SelectionSplit, SplitTooCoarse};
pub use services::*;
pub use split::*;

#[cfg(test)]
mod tests;
