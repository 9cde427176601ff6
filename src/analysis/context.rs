//! Where and when one analysis runs: the variants' Deployments, the stage, the clock, and
//! what the capacity model needs to know of each variant's config and CPU limit.

use jiff::Timestamp;

use crate::api::{RenderedServer, ServerConfig};

/// Where and when the analysis runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisContext {
    pub namespace: String,
    /// The app container (for `{{container}}` and the memory check).
    pub container: String,
    /// The target Deployment.
    pub baseline_deployment: String,
    pub candidate_deployment: String,
    pub stage_index: i32,
    /// When the current stage's clock started: `{{window}}` reaches back to it.
    pub stage_started_at: Option<Timestamp>,
    /// Effective weight when the analysis runs, percent.
    pub weight: i32,
    /// Evaluation time of every query.
    pub now: Timestamp,
    /// The baseline's server config as read back from the target (its capacity estimate).
    pub baseline_config: Option<RenderedServer>,
    /// The app container's CPU limit in cores: the target's, and the candidate's (its own
    /// `resources` when `spec.candidate` sets them, else the target's).
    pub baseline_cpu_limit: Option<f64>,
    pub candidate_cpu_limit: Option<f64>,
    /// The candidate's server config when it is not `spec.candidate`: a selection's candidate,
    /// or its winner walking the stages.
    pub candidate_server: Option<ServerConfig>,
}
