//! Unit tests of the reconcile shell: one file per subject; `fixtures` is the fake API server
//! and the objects they share.

mod analyse;
mod autoscale;
mod clock;
mod config_source;
mod deletion;
mod deployments;
mod endpoints;
mod error;
mod events;
mod experiments;
mod external;
mod fake_server;
mod fixtures;
mod fresh;
mod gateway;
mod index;
mod metrics;
mod notify;
mod observe;
mod owner;
mod preflight;
mod prometheus_provider;
mod promote;
mod reconcile;
mod run;
mod scale;
mod select;
mod select_gateway;
mod status;
mod variants;
