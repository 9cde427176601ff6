//! What one analysis recorded, and the capacity model's measurements and predictions, as
//! status keeps them (the stages' `analyses`, a selection's variants, the capacity gate).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::verdict::{CheckResult, Verdict};
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRecord {
    pub at: Time,
    /// Stage index the analysis ran in.
    pub stage_index: i32,
    /// Effective weight when it ran.
    pub weight: i32,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_requests: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_requests: Option<f64>,
    pub checks: Vec<CheckResult>,
    /// Why the verdict, in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// CPU and I/O time per request, request rates and the capacity estimate, as far as
    /// Prometheus had them (what it had no data for is absent, never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityMeasurement>,
}

/// What one analysis measured for the capacity estimate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CapacityMeasurement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<VariantCapacity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<VariantCapacity>,
    /// Requests per second across both variants: what each stage's share is a share of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_rate: Option<f64>,
}

impl CapacityMeasurement {
    /// `None` when nothing at all was measured, so status carries no empty block.
    pub fn non_empty(self) -> Option<Self> {
        (self != Self::default()).then_some(self)
    }
}

/// One variant's share of a capacity measurement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct VariantCapacity {
    /// CPU seconds per request: running Ruby (holding the GVL) from the GVL counters, or the
    /// container's CPU over its requests from standard metrics (`source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_per_request: Option<f64>,
    /// Seconds waiting per request: I/O wait from the GVL counters, or wall − CPU from
    /// standard metrics (which counts GVL wait in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_per_request: Option<f64>,
    /// Seconds per request an async worker's event loop was stalled (its lag probe): counted
    /// as CPU in a Falcon variant's capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_per_request: Option<f64>,
    /// Where `cpuPerRequest` and `ioPerRequest` come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CapacitySource>,
    /// Requests per second of the variant's busiest pod over the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_pod_rate: Option<f64>,
    /// Estimated saturation throughput of one pod, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_per_pod: Option<f64>,
    /// 1 − perPodRate / capacityPerPod; negative: above the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<f64>,
    /// What limits the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<CapacityBound>,
}

impl VariantCapacity {
    pub fn non_empty(self) -> Option<Self> {
        (self != Self::default()).then_some(self)
    }
}

/// Where a variant's CPU and I/O seconds per request come from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CapacitySource {
    /// The GVL instrumentation counters (`runningSeconds`, `ioWaitSeconds`, `gvlWaitSeconds`):
    /// exact.
    GvlCounters,
    /// What every app on Kubernetes has: the container's CPU (cAdvisor, `cpuUsage`) over the
    /// request counter, and the request-duration histogram's or summary's `_sum / _count`;
    /// I/O = wall − CPU. Used where the GVL counters have no data.
    StandardMetrics,
}

impl CapacitySource {
    /// As status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacitySource::GvlCounters => "gvlCounters",
            CapacitySource::StandardMetrics => "standardMetrics",
        }
    }

    /// For people: `GVL counters`, `standard metrics`.
    pub fn describe(self) -> &'static str {
        match self {
            CapacitySource::GvlCounters => "GVL counters",
            CapacitySource::StandardMetrics => "standard metrics",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CapacityBound {
    /// Every thread is busy: `threads / (cpu + io)` per worker.
    Threads,
    /// The GVL is busy all the time: `1 / cpu` per worker.
    Gvl,
    /// The container's CPU limit: `limit / cpu` per pod.
    CpuLimit,
}

/// The capacity gate's prediction for one weight step.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityGate {
    /// The stage the prediction is for (`3/3`) and its index.
    pub stage: String,
    pub stage_index: i32,
    /// The candidate's share of traffic there as the router will give it, percent.
    pub weight: i32,
    /// Candidate pods there.
    pub candidate_pods: i32,
    /// Requests per second across both variants the prediction starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_rate: Option<f64>,
    /// Requests per second each candidate pod would serve there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_rate_per_pod: Option<f64>,
    /// The candidate's estimated saturation throughput per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_per_pod: Option<f64>,
    /// predictedRatePerPod / capacityPerPod (1.0 = saturated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_utilization: Option<f64>,
    /// Where the CPU and I/O seconds per request of the prediction come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CapacitySource>,
    /// `spec.analysis.maxPredictedUtilization` as a share.
    pub max_utilization: f64,
    /// Pass: the step may be taken; Fail: the candidate would be over the limit;
    /// Inconclusive: not enough data in the current stage to predict.
    pub verdict: Verdict,
    pub message: String,
    /// The analysis the prediction comes from (the one with the highest prediction in the
    /// current stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_at: Option<Time>,
    /// A person approved this step despite the gate (approve annotation on the hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
}
