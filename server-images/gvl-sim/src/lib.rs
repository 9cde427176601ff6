//! gvl-sim: a server that behaves like Ruby's threaded (Puma, GVL-bound thread pool) and
//! fiber (Falcon, event loop) servers, with the Ruby reference app's interface and metric
//! names, and an open-model load generator.

pub mod config;
pub mod env;
pub mod falcon;
pub mod gvl;
pub mod http;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod puma;
pub mod queue_time;
pub mod receive;
pub mod server;
pub mod shared;
pub mod work;
