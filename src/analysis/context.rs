//! Where and when one analysis runs: the variants' Deployments, the stage, the clock, and
//! what the capacity model needs to know of each variant's config and CPU limit.

use std::time::Duration;

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

/// Longest `{{window}}`: a day of a pod's cAdvisor samples is a few thousand points.
const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// `{{window}}`: since the stage began (a fit over the stage), at least one interval, at most a
/// day; whole seconds.
pub fn fit_window(
    stage_started_at: Option<Timestamp>,
    now: Timestamp,
    interval: Duration,
) -> Duration {
    let since = stage_started_at
        .map(|s| now.duration_since(s))
        .filter(|d| d.is_positive())
        .map(|d| Duration::from_secs(d.as_secs().unsigned_abs()))
        .unwrap_or(Duration::ZERO);
    since.clamp(interval, MAX_WINDOW.max(interval))
}
