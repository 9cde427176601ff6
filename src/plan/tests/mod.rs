//! Unit tests of the stage machine: one file per subject; `fixtures` holds what they share.

mod approval;
mod autoscaler;
mod baseline;
mod bounds;
mod capacity;
mod controls;
mod deadline;
mod edit;
mod external;
mod finish;
mod first_step;
mod fixtures;
mod fresh_baseline;
mod improvement;
mod owner;
mod preflight;
mod progress;
mod ranking;
mod reason;
mod retry;
mod rollback;
mod select;
mod select_gateway;
mod selection_world;
mod sequential;
mod target;
mod walk;

// What every test file takes with `use super::*`: the machine, its fixtures, and the types
// they are written in.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::api::{
    AnalysisRecord, CheckResult, ConcurrencyExperimentSpec, ConcurrencyExperimentStatus,
    RenderedServer, Router, ServerKind, Verdict,
};
use fixtures::*;
