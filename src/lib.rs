//! concurrency-operator: canaries concurrency configurations of Ruby web servers.
//!
//! The pure core (`api`, `plan`, `workload`, `traffic`, `analysis`) has no I/O; `controller`
//! and `telemetry` are the thin shell around it.

pub mod analysis;
pub mod api;
pub mod cli;
pub mod controller;
pub mod drain;
pub mod kubectl;
pub mod leader;
pub mod plan;
pub mod prometheus;
pub mod telemetry;
pub mod traffic;
pub mod workload;
