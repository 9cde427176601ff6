//! Status: everything a person needs to understand the experiment without reading logs.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::record::{AnalysisRecord, CapacityGate};
use super::selection::SelectionStatus;
use super::server_config::RenderedServer;
use super::verdict::Verdict;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum Phase {
    #[default]
    Pending,
    /// Several candidates run at once against a fresh baseline (docs/selection.md).
    Selecting,
    Progressing,
    Paused,
    Promoting,
    Succeeded,
    RollingBack,
    RolledBack,
    Invalid,
}

impl Phase {
    /// Finished phases: nothing more happens, and nothing is left to restore.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::RolledBack | Phase::Invalid)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Selecting => "Selecting",
            Phase::Progressing => "Progressing",
            Phase::Paused => "Paused",
            Phase::Promoting => "Promoting",
            Phase::Succeeded => "Succeeded",
            Phase::RollingBack => "RollingBack",
            Phase::RolledBack => "RolledBack",
            Phase::Invalid => "Invalid",
        }
    }
}

/// Analyses kept in status (`status.analyses`), newest last.
pub const KEPT_ANALYSES: usize = 10;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyExperimentStatus {
    #[serde(default)]
    pub phase: Phase,
    /// `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Index into `spec.stages` of the current stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_index: Option<i32>,
    /// `2/3` — for people and the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// When the current stage was entered, or resumed from `spec.paused` before its split was
    /// in force: `spec.progressDeadline` counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_entered_at: Option<Time>,
    /// When the current stage's weight was reached (its duration counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_started_at: Option<Time>,
    /// gatewayAPI: when the operator last changed the route's weights. A variant's pods are
    /// removed only `spec.traffic.scaleDownDelay` after it, once the Gateway has applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_changed_at: Option<Time>,
    /// The weight the current stage asks for, percent.
    #[serde(default)]
    pub planned_weight: i32,
    /// The split actually in force, percent (e.g. 2 of 6 ready pods = 33).
    #[serde(default)]
    pub effective_weight: i32,
    /// Per stage, the candidate's share the router can really give (the `replicas` router
    /// splits by pods: 1 replica gives 50, 50, 100 for 30, 70, 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planned_effective_weights: Vec<i32>,
    /// The capacity gate's latest prediction for the next weight step (at the last stage: the
    /// one it was entered with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_gate: Option<CapacityGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<VariantStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<VariantStatus>,
    /// The selection among `spec.candidates`: variants, eliminations, ranking and winner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionStatus>,
    /// The long-running target's check values beside the fresh baseline's (the candidates are
    /// judged against the fresh one), from the last analysis that measured both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_baseline: Option<FreshBaselineStatus>,
    /// The most recent analyses, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyses: Vec<AnalysisRecord>,
    /// Per check name, the candidate's query as last sent to Prometheus (in a selection, the
    /// last candidate analysed: the others differ only in `{{pods}}`), cut to 512 bytes. Kept
    /// once here rather than in every analysis, so status stays small whatever the queries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queries: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verdict: Option<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_analysis_at: Option<Time>,
    /// Failed analyses so far in this experiment.
    #[serde(default)]
    pub failed_analyses: i32,
    /// Inconclusive analyses so far in this experiment.
    #[serde(default)]
    pub inconclusive_analyses: i32,
    /// Per check name, the baseline's last value measured while it still served traffic
    /// (weight below 100 and at least `minRequests` baseline requests). At 100% the baseline
    /// serves nothing, so the candidate is compared with this; unlike `analyses` it is never
    /// truncated, so a last stage of any length can pass.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub baseline_reference: BTreeMap<String, BaselineReference>,
    /// Consecutive analyses in which Prometheus had no sample for any check (see the `NoData`
    /// condition).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub no_data_analyses: i32,
    /// Passed analyses in the current stage; reset when a stage is entered. A stage advances
    /// only after at least one (records are truncated, so this is not counted from them).
    #[serde(default)]
    pub stage_passed_analyses: i32,
    /// `minImprovement`, judged once every stage has passed: per check the medians, the
    /// measured difference and whether it was met (cut to 4 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub improvement: Option<String>,
    /// Why the experiment holds by itself until approved (`InconclusiveLimit`,
    /// `AwaitingApproval`) or until Git changes the target (`AwaitingExternalPromotion`);
    /// `spec.paused` is read from the spec, not stored here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_reason: Option<String>,
    /// The `concurrency.dev/approve` annotation was acted on and is being removed; until it is
    /// seen gone it approves nothing more, so a crash before the removal cannot approve twice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve_annotation_consumed: bool,
    /// The same for the `concurrency.dev/retry` annotation: a retry (or its refusal) was
    /// decided and the annotation is being removed; until it is seen gone it retries nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry_annotation_consumed: bool,
    /// A retry found the `concurrency.dev/abort` annotation that rolled the previous run back:
    /// it is spent and being removed; until it is seen gone it aborts nothing (`spec.abort`
    /// still does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort_annotation_consumed: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The final (or in-progress) decision and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// One human sentence about what is happening now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<Recommendation>,
    /// `promotion: external`: the change to commit, from the hold at the last stage on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_patch: Option<super::PromotionPatch>,
    /// The candidate config being promoted, fixed when the experiment decided to promote: it is
    /// what the stages judged, so an edit of `spec.candidate` after that is not what lands in
    /// the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoting: Option<super::ServerConfig>,
    /// The pre-flight series lookup (before anything is created): when it ran, and once it
    /// passed, so a restarted operator does not look again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<super::PreflightStatus>,
    /// What the target looked like before the experiment, so it can be restored exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<OriginalState>,
    /// The target's `spec.replicas` as this experiment last set it, and the count before that.
    /// While it runs, a count that is neither of these nor `original.replicas` was set by
    /// someone else: it becomes the target's size (`original.replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_scale: Option<TargetScale>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetScale {
    /// The count before the last scale (what the target still has if that write failed).
    pub from: i32,
    /// The count last asked for.
    pub to: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The baseline's value of one check as last measured, and when and where.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselineReference {
    pub value: f64,
    /// The analysis that measured it.
    pub at: Time,
    pub stage_index: i32,
    /// Effective weight of that analysis, percent.
    pub weight: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct VariantStatus {
    pub deployment: String,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    /// `puma 2×4`.
    pub summary: String,
    /// The server config as rendered into (or read back from) the pod template.
    pub config: RenderedServer,
    /// Anchored regex of this variant's pod names, as used for `{{pods}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DecisionAction {
    Promote,
    Rollback,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub action: DecisionAction,
    /// Short category, also the Event reason (e.g. `CheckFailed`, `InconclusiveLimit`, `Aborted`).
    pub reason: String,
    pub message: String,
    pub at: Time,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    /// Measured I/O share: p = io / (running + io + gvlWait) from the GVL counters, or
    /// (wall − CPU) / wall from standard metrics (`source`).
    pub io_ratio: f64,
    /// Where `ioRatio` comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<super::CapacitySource>,
    /// Largest thread count whose step still gains at least `minGain`.
    pub threads: i32,
    /// Above `asyncAbove` I/O an async server (Falcon) is advised.
    pub async_server_advised: bool,
    /// With Falcon advised: workers per CPU core (seed 004: 1 when I/O-bound, 2 when CPU is
    /// mixed in, since one worker's fibers share one core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_workers_per_core: Option<i32>,
    /// Amdahl speedup S(n) for n = 1.. (index 0 is n = 1).
    pub speedups: Vec<f64>,
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct OriginalState {
    /// The target's `spec.replicas` before the experiment.
    pub replicas: i32,
    /// The HTTPRoute's backendRefs before the experiment (gatewayAPI), as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_backend_refs: Option<String>,
    /// Fingerprint of the target's pod template when the experiment started,
    /// `t=<template>,c=<containers>,i=<images>,e=<env>` (SHA-256 prefixes; only `t` decides).
    /// A different template mid-flight rolls back with reason `TargetChanged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_hash: Option<String>,
    /// Fingerprint of that template with the candidate config rendered in, env order aside
    /// (`promotion: external`): the target matches it once Git carries the candidate config
    /// and nothing else changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_template_hash: Option<String>,
    /// At 100 % with the `replicas` router under an HPA: the candidate size the HPA's rule
    /// asked for (Event `CandidateAutoscaled`). `replicas` follows it as those pods get ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaled_replicas: Option<i32>,
}

/// `status.freshBaseline`: the fresh baseline's Deployment while it runs, and what pod age
/// alone does.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct FreshBaselineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<BaselinesMeasured>,
}

/// Each check's value on the long-running target and on the fresh baseline (same template,
/// pods as young as the candidates') in the same interval.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselinesMeasured {
    pub at: Time,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<BaselineValues>,
}

/// One check on both baselines.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselineValues {
    pub name: String,
    /// On the long-running target's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// On the fresh baseline's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh: Option<f64>,
    /// Why a value is missing (a failed query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
