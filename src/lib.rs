//! concurrency-operator: canaries concurrency configurations of Ruby web servers.
//!
//! The pure core has no I/O: `api` (CRD types, quantities), `workload` (rendering),
//! `traffic` (splits and route objects), `plan` (the stage machine), `notify` (which decisions
//! are told, and their payloads) and `analysis` (queries, judgement, statistics,
//! recommendation, capacity) — `analysis` reads its numbers through the
//! `analysis::MetricSource` trait and never opens a connection itself; `cli` only parses the
//! command line. The thin shell does the I/O: `prometheus` (the Prometheus client, the
//! `MetricSource` in use), `controller` (the Kubernetes API), `notify::deliver` (sending
//! notifications: the one part of `notify` with I/O), `telemetry` (logs, the HTTP endpoint,
//! signals), `leader` (the Lease), `drain` (deleting experiments before an uninstall) and
//! `kubectl` (the plugin's API and Prometheus calls).
//!
//! `rbac` declares the Kubernetes permissions the shell needs (checked against the mocked API
//! server's calls and the chart).
//!
//! Modules form layers, each using only those below it (`scripts/import-graph` fails on a
//! cycle). From the bottom: `api`, `analysis`, `workload`, `traffic`, `plan`, `notify`,
//! `controller`; `prometheus` sits on `analysis`, `telemetry` on `api`, `notify::deliver` on
//! the rest of `notify` and on `telemetry`; `cli`, `drain`, `leader` and `kubectl` are at the top.

pub mod analysis;
pub mod api;
pub mod cli;
pub mod controller;
pub mod drain;
pub mod kubectl;
pub mod leader;
pub mod notify;
pub mod plan;
pub mod prometheus;
pub mod rbac;
pub mod telemetry;
#[cfg(test)]
mod test_api;
pub mod traffic;
pub mod workload;
