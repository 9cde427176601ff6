//! Selection (issue 12, docs/selection.md): several candidates at once against a fresh
//! baseline, the failing ones eliminated, the objective picking the winner, which then walks
//! the stages as the single candidate. Spec and status types; the machine is `plan::select`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::quantity::{DURATION_PATTERN, PERCENT_PATTERN};
use super::record::AnalysisRecord;
use super::server_config::RenderedServer;
use super::verdict::{CheckResult, Verdict};

/// Most candidates one selection runs: with the fresh baseline that is six variants, each on
/// at least one pod.
pub const MAX_CANDIDATES: usize = 5;
/// The candidates' shares together may not exceed this, percent (the fresh baseline runs the
/// production config, so its share is not counted).
pub const MAX_SELECTION_TOTAL: i32 = 50;

/// How the selection phase runs (`spec.selection`, with `spec.candidates` only).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    /// Share of traffic each candidate (and the fresh baseline) gets, percent.
    #[serde(default = "default_weight")]
    #[schemars(range(min = 1, max = 50))]
    pub weight: i32,
    /// How long all variants run side by side before the choice.
    #[serde(default = "default_duration")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub duration: String,
    /// What the choice minimizes among the survivors; default `memory`.
    #[serde(default)]
    pub objective: Objective,
    /// Objective values closer than this (relative to the best) are a tie, which goes to the
    /// cheaper config (fewer workers × threads); default `5%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub tolerance: Option<String>,
    /// Hold the selection while every variant runs far below its estimated capacity (low
    /// signal: latency cannot tell configs apart there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_signal: bool,
}

impl Default for Selection {
    fn default() -> Self {
        Self {
            weight: default_weight(),
            duration: default_duration(),
            objective: Objective::default(),
            tolerance: None,
            require_signal: false,
        }
    }
}

/// The default `selection.tolerance`.
pub const DEFAULT_TOLERANCE: &str = "5%";

fn default_weight() -> i32 {
    10
}

fn default_duration() -> String {
    "20m".into()
}

/// What the selection minimizes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.minimize != 'custom' || has(self.query)").message("objective minimize: custom needs a query").field_path(".query").reason(kube::core::Reason::FieldValueRequired),
    validation = Rule::new("self.minimize == 'custom' || !has(self.query)").message("objective query is only used with minimize: custom").field_path(".query").reason(kube::core::Reason::FieldValueForbidden)
)]
pub struct Objective {
    #[serde(default)]
    pub minimize: ObjectiveMetric,
    /// PromQL returning one value per variant (`{{pods}}` and the other template variables);
    /// `minimize: custom` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub query: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum ObjectiveMetric {
    /// Average working-set bytes per pod (the `memory` check's query).
    #[default]
    Memory,
    /// p99 request duration (the `latency` check's query).
    Latency,
    /// p99 request queue time (the `queueTime` check's query).
    QueueTime,
    /// CPU seconds per request served (`capacity.cpuPerRequest`).
    Cpu,
    /// `objective.query`.
    Custom,
}

impl ObjectiveMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveMetric::Memory => "memory",
            ObjectiveMetric::Latency => "latency",
            ObjectiveMetric::QueueTime => "queueTime",
            ObjectiveMetric::Cpu => "cpu",
            ObjectiveMetric::Custom => "custom",
        }
    }
}

/// `spec.baseline`: what the candidates are judged against.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct BaselineSpec {
    /// Start a copy of the target's template with the candidates and judge them against it,
    /// not against the long-running pods (Ruby memory grows with pod age). Always on for
    /// `candidates`.
    #[serde(default)]
    pub fresh: bool,
}

/// `status.selection`: where the selection stands and, once chosen, why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SelectionStatus {
    /// When every variant's share was first in force (the duration counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// One entry per candidate, in `spec.candidates` order; the ranking is computed from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<SelectionVariant>,
    /// Survivors best first, then the eliminated (the last choice or the current standing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranking: Vec<RankEntry>,
    /// Index into `spec.candidates` of the winner, once chosen; from then on it is the
    /// candidate the stages walk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<i32>,
    /// The choice in one sentence: winner, runner-up, margin, significance, low signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Analyses of the selection in which every variant ran far below its capacity.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub low_signal_analyses: i32,
    /// Analyses of the selection in which some variant did not (`requireSignal` waits for one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub signal_analyses: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// One candidate during selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SelectionVariant {
    /// Index into `spec.candidates`.
    pub index: i32,
    /// `puma 2×4`.
    pub summary: String,
    /// The config as given in `spec.candidates` when the selection started: an edit of the
    /// list restarts the selection.
    #[serde(default)]
    pub config: RenderedServer,
    /// Per-interval objective values, newest last (at most `KEPT_ANALYSES` + 1): the samples
    /// of the significance test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objective_samples: Vec<f64>,
    /// The fresh baseline's objective values of the same intervals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_samples: Vec<f64>,
    /// Passed analyses of this candidate (against the fresh baseline).
    #[serde(default)]
    pub passed_analyses: i32,
    /// Failed analyses of this candidate; one more than `analysis.failureLimit` eliminates it.
    #[serde(default)]
    pub failed_analyses: i32,
    /// Lowest headroom measured (1 − busiest pod's rate / estimated capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<f64>,
    /// The last analysis's checks, candidate against the fresh baseline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    /// The capacity measurements of its analyses with enough requests (newest last, at most
    /// `KEPT_ANALYSES`; records without checks): the winner's predict its step into stage 1.
    /// `capacity.totalRate` is the Service's rate, estimated as the candidate's own over its
    /// share (a selection's analysis measures only the candidate and the fresh baseline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_samples: Vec<AnalysisRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eliminated: Option<Elimination>,
}

/// Why and when a candidate left the selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Elimination {
    pub at: Time,
    /// The failing checks, e.g. `queueTime`.
    pub checks: Vec<String>,
    /// The sentence of its Event, with the values.
    pub message: String,
}

/// One line of the ranking.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RankEntry {
    /// Index into `spec.candidates`.
    pub index: i32,
    pub summary: String,
    pub config: RenderedServer,
    /// Mean of the objective samples; absent when never measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<f64>,
    /// workers × threads (Falcon: workers): what a tie is broken by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<f64>,
    // No `checks`: they are `variants[index].checks` (status written by an older operator
    // repeats them here; unknown fields are ignored when it is read).
    /// Pass for a survivor, Fail for an eliminated one, Inconclusive for one never measured.
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
