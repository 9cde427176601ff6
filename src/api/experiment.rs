//! The `ConcurrencyExperiment` custom resource.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::analysis_spec::Analysis;
use super::quantity::DURATION_PATTERN;
use super::selection::{BaselineSpec, Selection};
use super::server_config::ServerConfig;
use super::status::ConcurrencyExperimentStatus;
use super::traffic::Traffic;

/// Move a Deployment from one server config to another, judged stage by stage against the
/// running baseline.
// Clippy reads the repeated `type_` inside each `printcolumn(...)` as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "concurrency.dev",
    version = "v1alpha1",
    kind = "ConcurrencyExperiment",
    plural = "concurrencyexperiments",
    shortname = "cexp",
    category = "all",
    namespaced,
    status = "ConcurrencyExperimentStatus",
    derive = "PartialEq",
    cel,
    doc = "Canary of a Ruby server's concurrency configuration",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Stage", type_ = "string", json_path = ".status.stage"),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".status.effectiveWeight",
        description = "candidate share of ready pods or route weight, percent"
    ),
    printcolumn(name = "Verdict", type_ = "string", json_path = ".status.lastVerdict"),
    printcolumn(
        name = "Candidate",
        type_ = "string",
        json_path = ".status.candidate.summary",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.stages[size(self.stages) - 1].weight == 100").message("the last stage must have weight 100").field_path(".stages"),
    validation = Rule::new("self.stages.map(s, s.weight).isSorted() && self.stages.all(s, self.stages.exists_one(t, t.weight == s.weight))").message("stage weights must be strictly increasing").field_path(".stages"),
    // A Falcon candidate has no Puma thread pool: these checks would be Inconclusive at every
    // analysis and roll back for nothing.
    validation = Rule::new("!self.analysis.checks.exists(c, has(c.metric) && (c.metric == 'backlog' || c.metric == 'threadUtilization')) || ((!has(self.candidate) || self.candidate.server != 'falcon') && (!has(self.candidates) || !self.candidates.exists(v, v.server == 'falcon')))").message("backlog and threadUtilization read Puma's thread pool stats, which a falcon candidate does not have (use queueTime or a custom query)").field_path(".analysis.checks"),
    validation = Rule::new("!self.analysis.checks.exists(c, has(c.metric) && c.metric == 'eventLoopLag') || (has(self.candidate) && self.candidate.server == 'falcon') || (has(self.candidates) && self.candidates.all(v, v.server == 'falcon'))").message("eventLoopLag reads an async server's event-loop lag probe: every candidate must be falcon").field_path(".analysis.checks"),
    // Transition rules (they compare with the stored object, so they run on updates only, and
    // a status write leaves the spec as it was). On the spec rather than on the fields: a rule
    // on an optional field runs only when old and new both have it, so adding or removing
    // `container` would slip through. The variants, Services and route weights were made for
    // these; changing them mid-flight would strand what was made.
    validation = Rule::new("self.targetRef == oldSelf.targetRef").message("spec.targetRef is immutable: delete and recreate the experiment").field_path(".targetRef"),
    validation = Rule::new("has(oldSelf.container) == has(self.container) && (!has(self.container) || self.container == oldSelf.container)").message("spec.container is immutable: delete and recreate the experiment").field_path(".container"),
    // Selection (docs/selection.md): one server config or several, never both.
    validation = Rule::new("!(has(self.candidate) && has(self.candidates))").message("candidate and candidates are exclusive: give one server config in candidate, or 2 to 5 in candidates").field_path(".candidates").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("has(self.candidate) || has(self.candidates)").message("candidate is required (or candidates, 2 to 5 server configs to choose from)").field_path(".candidate").reason(kube::core::Reason::FieldValueRequired),
    validation = Rule::new("!has(self.selection) || has(self.candidates)").message("selection is only used with candidates").field_path(".selection").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.candidates) || !has(self.selection) || self.selection.weight * size(self.candidates) <= 50").message("selection.weight × the number of candidates must be at most 50 (percent of traffic on untried configs)").field_path(".selection.weight"),
    validation = Rule::new("!has(self.candidates) || !has(self.baseline) || self.baseline.fresh").message("a selection always runs a fresh baseline: baseline.fresh cannot be false with candidates").field_path(".baseline.fresh"),
    validation = Rule::new("has(oldSelf.traffic) == has(self.traffic) && (!has(self.traffic) || self.traffic == oldSelf.traffic)").message("spec.traffic is immutable (router, httpRoute, service): delete and recreate the experiment").field_path(".traffic")
)]
pub struct ConcurrencyExperimentSpec {
    /// The Deployment to change (same namespace); its pod template is the baseline.
    pub target_ref: TargetRef,
    /// The app container; default: the first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub container: Option<String>,
    /// The server config to try (or `candidates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<ServerConfig>,
    /// 2 to 5 server configs to choose from: they run at once against a fresh baseline, failing
    /// ones are eliminated, `selection.objective` picks the winner, which then walks the
    /// stages (docs/selection.md). Exclusive with `candidate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 5))]
    pub candidates: Option<Vec<ServerConfig>>,
    /// How the selection runs; `candidates` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// What the candidate is judged against: `fresh: true` starts a copy of the target with
    /// it (always so for `candidates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineSpec>,
    #[serde(default)]
    pub traffic: Traffic,
    /// Candidate weights in percent with a minimum duration each; default 30/70/100 × 10m.
    #[serde(default = "default_stages")]
    #[schemars(length(min = 1, max = 20))]
    pub stages: Vec<Stage>,
    pub analysis: Analysis,
    /// `auto` promotes after the last stage; `manual` holds there until approved; `external`
    /// (GitOps) holds there with the change to commit in `status.promotionPatch`, and
    /// completes once the target's template carries the candidate config — never written by
    /// the operator.
    #[serde(default)]
    pub promotion: Promotion,
    /// Approves a `manual` promotion, declaratively (GitOps); it never lifts an inconclusive
    /// hold. For a one-shot approval of the next hold of either kind use the annotation
    /// `concurrency.dev/approve: "true"`, which the operator removes once it acted on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// Holds the current stage; analyses keep running but nothing advances.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Rolls back now (also: annotation `concurrency.dev/abort: "true"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    /// How long a stage may take to get its split in force (candidate pods ready, target
    /// scaled, route weights set); past it the experiment rolls back with reason
    /// `ProgressDeadlineExceeded`. Not counted while `paused`.
    #[serde(default = "default_progress_deadline")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub progress_deadline: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// Deployment name.
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
        length(min = 1, max = 253)
    )]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// Candidate share of traffic, percent.
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    /// Minimum time at this weight before it may advance.
    #[serde(default = "default_stage_duration")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub duration: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum Promotion {
    #[default]
    Auto,
    Manual,
    /// The target belongs to a GitOps tool (Argo CD, Flux): the promotion is a commit.
    External,
}

/// Annotations a person can set with `kubectl annotate`.
pub const ANNOTATION_ABORT: &str = "concurrency.dev/abort";
pub const ANNOTATION_APPROVE: &str = "concurrency.dev/approve";
/// One-shot: restarts a `RolledBack` experiment in place from stage 1; removed once acted on.
pub const ANNOTATION_RETRY: &str = "concurrency.dev/retry";

/// A spec with neither `candidate` nor `candidates` is refused by the schema; code that reads
/// one anyway sees this empty config (never rendered: `plan::validate` refuses the spec).
static NO_CANDIDATE: ServerConfig = ServerConfig {
    server: super::server_config::ServerKind::Puma,
    workers: None,
    threads: None,
    min_threads: None,
    db_pool: None,
    falcon: None,
    env: Vec::new(),
    command: None,
    args: None,
    resources: None,
};

impl ConcurrencyExperimentSpec {
    /// The single candidate of `spec.candidate`. A selection's candidate is its winner, read
    /// from `status.selection.winner` (see `selection_winner`).
    pub fn single_candidate(&self) -> &ServerConfig {
        self.candidate.as_ref().unwrap_or(&NO_CANDIDATE)
    }

    /// `spec.candidates` as a slice (empty for a single-candidate experiment).
    pub fn candidate_list(&self) -> &[ServerConfig] {
        self.candidates.as_deref().unwrap_or(&[])
    }

    /// The candidate the stages walk: `spec.candidate`, or the selection's winner once chosen.
    pub fn selection_winner(&self, winner: Option<i32>) -> Option<&ServerConfig> {
        match &self.candidate {
            Some(c) => Some(c),
            None => winner
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.candidate_list().get(i)),
        }
    }

    /// The candidate the stages walk given the stored status: `spec.candidate`, or the
    /// selection's winner once chosen (the plan and the shell both ask this).
    pub fn walked_candidate(&self, status: Option<&ConcurrencyExperimentStatus>) -> &ServerConfig {
        let winner = status
            .and_then(|s| s.selection.as_ref())
            .and_then(|s| s.winner);
        self.selection_winner(winner)
            .unwrap_or_else(|| self.single_candidate())
    }

    /// The experiment chooses among several candidates first.
    pub fn selects(&self) -> bool {
        self.candidate.is_none() && !self.candidate_list().is_empty()
    }

    /// The selection settings, defaults filled in.
    pub fn selection_or_default(&self) -> Selection {
        self.selection.clone().unwrap_or_default()
    }

    /// A fresh baseline runs beside the candidate(s).
    pub fn fresh_baseline(&self) -> bool {
        self.selects() || self.baseline.as_ref().is_some_and(|b| b.fresh)
    }
}

pub fn default_stages() -> Vec<Stage> {
    [30, 70, 100]
        .into_iter()
        .map(|weight| Stage {
            weight,
            duration: default_stage_duration(),
        })
        .collect()
}

fn default_stage_duration() -> String {
    "10m".into()
}

fn default_progress_deadline() -> String {
    "10m".into()
}

impl ConcurrencyExperiment {
    /// The config a promotion writes into the target: the judged one, fixed in
    /// `status.promoting` at the decision; the walked candidate until then.
    pub fn promoted_candidate(&self) -> &ServerConfig {
        match self.status.as_ref().and_then(|s| s.promoting.as_ref()) {
            Some(judged) => judged,
            None => self.spec.walked_candidate(self.status.as_ref()),
        }
    }

    /// Whether the annotation `key` is set to `true` (any case, spaces around allowed): how
    /// the one-shot requests (`ANNOTATION_*`) are read, by the operator and the plugin alike.
    pub fn flag(&self, key: &str) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }
}
