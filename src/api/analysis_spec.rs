//! What is measured at every interval and the limits that judge it.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::metric_names::MetricsSpec;
use super::quantity::{parse_percent, Limit, QuantityError, DURATION_PATTERN, PERCENT_PATTERN};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.checks.all(c, has(c.metric) || has(c.name))").message("a check with a custom query needs a name").field_path(".checks"),
    validation = Rule::new("self.checks.all(c, self.checks.exists_one(d, (has(d.name) ? d.name : d.metric) == (has(c.name) ? c.name : c.metric)))").message("check names must be unique (a built-in check is named after its metric)").field_path(".checks")
)]
pub struct Analysis {
    /// Where the analysis queries; omitted: the operator's default Prometheus (Helm value
    /// `prometheus.default`).
    #[serde(default)]
    pub prometheus: PrometheusSource,
    /// How often the checks run; also the PromQL range (`{{interval}}`). Make it at least two
    /// Prometheus scrape intervals: `rate()` needs two samples in its range.
    #[serde(default = "default_interval")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    // A duration is zero exactly when none of its digits is.
    #[x_kube(validation = Rule::new("self.matches('[1-9]')").message("interval must be longer than 0s (make it at least two Prometheus scrape intervals)"))]
    pub interval: String,
    /// Failed analyses tolerated in the experiment; one more rolls back.
    #[serde(default = "default_failure_limit")]
    #[schemars(range(min = 0, max = 100))]
    pub failure_limit: i32,
    /// Inconclusive analyses (no data, too few requests, Prometheus errors) tolerated.
    #[serde(default = "default_inconclusive_limit")]
    #[schemars(range(min = 0, max = 100))]
    pub inconclusive_limit: i32,
    /// What happens when `inconclusiveLimit` is exceeded.
    #[serde(default)]
    pub on_inconclusive: InconclusiveAction,
    /// Requests each variant must serve in an interval for the analysis to count.
    #[serde(default = "default_min_requests")]
    #[schemars(range(min = 0))]
    pub min_requests: i64,
    /// The app's exporter (`preset`) and the metric names that differ from it.
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[schemars(length(min = 1, max = 32))]
    pub checks: Vec<Check>,
    /// Compare per-interval samples with a Mann-Whitney U test in addition to the limits
    /// (`judge: perInterval` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistical: Option<Statistical>,
    /// How `latency`, `queueTime` and `errorRate` checks decide. `perInterval`: each interval's
    /// value against the limits, failures counted against `failureLimit`. `sequential`:
    /// anytime-valid tests on every request of the stage so far (the histogram's buckets, the
    /// error counts), which roll back as soon as the evidence shows the candidate beyond a
    /// limit, end a stage early once it shows it within them, and say how many more requests
    /// a verdict needs (docs/judge.md). Other checks are judged per interval either way.
    #[serde(default, skip_serializing_if = "JudgeMode::is_default")]
    pub judge: JudgeMode,
    /// `judge: sequential`: the chance, over the whole experiment, of rolling back a candidate
    /// that is within every limit (split over the tests and stages).
    #[serde(default = "default_false_rollback_rate")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub false_rollback_rate: String,
    /// Thread-count recommendation from the measured I/O share.
    #[serde(default)]
    pub recommendation: RecommendationSpec,
    /// The capacity gate: before each weight step, the candidate's predicted utilization at
    /// the next stage (its per-pod load there over its estimated capacity, from the CPU and
    /// I/O time per request measured in the current stage) must not exceed this, else the
    /// experiment rolls back (or holds, with `onInconclusive: pause`) with reason
    /// `InsufficientCapacity`. `off` turns the gate off (an exporter without the running and
    /// I/O-wait counters).
    #[serde(default = "default_max_predicted_utilization")]
    #[schemars(regex(pattern = MAX_UTILIZATION_PATTERN))]
    pub max_predicted_utilization: String,
    /// A restart of the candidate's app container (OOMKilled, a crash, an evicted pod) fails
    /// the analysis of the interval it happened in, whatever the metrics say: the requests it
    /// was serving are lost, and the app's own metrics died with the process. `false` only
    /// records them.
    #[serde(default = "default_true")]
    pub fail_on_restart: bool,
    /// A Falcon candidate whose pods run another number of event loops than the workers
    /// rendered (a `count` in `falcon.rb` computed from `Etc.nprocessors` overrides
    /// `WEB_CONCURRENCY`) fails the analysis: the experiment would judge, and promote, a config
    /// other than the one it names. Measured by the event-loop probe (`eventLoopProbeSeconds`);
    /// without that series it is only noted. `false` only records the count.
    #[serde(default = "default_true")]
    pub fail_on_worker_mismatch: bool,
}

/// The name of the restart rule's entry among an analysis' checks (`failOnRestart`); a check of
/// the spec may not take it.
pub const RESTARTS_CHECK: &str = "restarts";

/// The name of the worker-count rule's entry among an analysis' checks
/// (`failOnWorkerMismatch`); a check of the spec may not take it.
pub const WORKERS_CHECK: &str = "workers";

/// Names of the rules judged beside the checks, which no check of the spec may take.
pub const RULE_CHECKS: [&str; 2] = [RESTARTS_CHECK, WORKERS_CHECK];

fn default_true() -> bool {
    true
}

/// `85%`, `120%`, or `off`.
pub const MAX_UTILIZATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?%|off)$";

/// `spec.analysis.maxPredictedUtilization` as a share (0.85), `None` when `off`.
pub fn max_predicted_utilization(analysis: &Analysis) -> Result<Option<f64>, QuantityError> {
    let field = "spec.analysis.maxPredictedUtilization";
    let v = analysis.max_predicted_utilization.trim();
    if v == "off" {
        return Ok(None);
    }
    let share = parse_percent(field, v)?;
    if share > 0.0 {
        Ok(Some(share))
    } else {
        // 0% would refuse every step: that is `off` turned inside out, never meant.
        Err(QuantityError::OutOfRange {
            field: field.into(),
            value: v.into(),
            why: "must be more than 0% (or off, to turn the capacity gate off)",
        })
    }
}

/// The Prometheus an analysis asks. Secrets are never written here: `credentials` names a set
/// the operator's configuration holds (docs/operations.md), and only what is not secret can be
/// set per experiment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusSource {
    /// Base URL, e.g. `http://prometheus.monitoring:9090` or `https://mimir.example/prometheus`
    /// (the query goes to `<url>/api/v1/query`). Omitted: the named credentials set's URL, else
    /// the operator's default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^https?://[^\s?#]+$"), length(max = 2048))]
    pub url: String,
    /// A credentials set of the operator's Prometheus configuration (bearer token or basic
    /// auth, CA), e.g. `team-a`; it may be limited to some namespaces and URLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub credentials: Option<String>,
    /// Extra request headers, e.g. `X-Scope-OrgID: team-a` for Mimir, Cortex or Thanos. Not
    /// `Authorization` (credentials come from `credentials`), nor a header the operator's
    /// configuration sets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<PrometheusTls>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusTls {
    /// The name Prometheus' certificate must carry, when it is not the URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub server_name: Option<String>,
    /// Accept any certificate (a test Prometheus with a self-signed one). The connection is
    /// then encrypted but not authenticated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

/// `spec.analysis.judge`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum JudgeMode {
    #[default]
    PerInterval,
    Sequential,
}

impl JudgeMode {
    fn is_default(&self) -> bool {
        *self == JudgeMode::PerInterval
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum InconclusiveAction {
    #[default]
    Rollback,
    Pause,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuiltinMetric {
    /// A quantile of the request-duration histogram (seconds).
    Latency,
    /// Average working-set bytes per pod.
    Memory,
    /// Share of request time spent waiting for the GVL (0–1).
    GvlWait,
    /// Share of requests answered with 5xx (0–1).
    ErrorRate,
    /// A quantile of the request queue-time histogram (seconds): the wait for a free thread
    /// that the request duration cannot see. Needs `X-Request-Start` from the load balancer.
    QueueTime,
    /// Requests waiting for a Puma thread, per pod (Puma's own stats: no header needed).
    Backlog,
    /// Busy Puma threads over the thread pools' maximum (0–1; Puma counts waiting requests
    /// as busy, so above 1 means queueing).
    ThreadUtilization,
    /// 1 − the busiest pod's request rate over its estimated capacity (0–1), from the
    /// capacity model (docs/capacity.md), not a query of its own: refuses a config that only
    /// passes because today's traffic is light (`min: 30%`).
    Headroom,
    /// Share of request time spent waiting for an ActiveRecord connection (0–1): a pool
    /// smaller than the requests in flight (Falcon's fibers, more Puma threads than
    /// connections). `ruby_db_pool_wait_seconds_total` from the concurrency-metrics gem.
    DbPoolWait,
    /// The busiest pod's app-container CPU over its CPU limit, else its request (0–1, cAdvisor
    /// only): seed 004 keeps workers at 40–60 % and adds one when any pod is at 100 %.
    CpuUtilization,
    /// The busiest pod's working-set growth, bytes per hour: a least-squares slope over the
    /// stage so far (`{{window}}`), so a leak shows long before the limit (seed 004: Falcon's
    /// memory grew 2.2× over 6 h). Judge it with `max` (e.g. `50Mi` an hour).
    MemoryGrowth,
    /// Seconds until the busiest pod reaches its container memory limit at that slope
    /// (`min: 24h`); 10 years when it does not grow. Needs a memory limit.
    TimeToLimit,
    /// The busiest pod's share of time its async event loop ran late (0–1): a blocking call
    /// (shell-out, a C extension keeping the GVL, sync file I/O) stalls every fiber of a
    /// worker, which mean latency at low load does not show. Falcon candidates only.
    EventLoopLag,
}

impl BuiltinMetric {
    pub fn name(self) -> &'static str {
        match self {
            BuiltinMetric::Latency => "latency",
            BuiltinMetric::Memory => "memory",
            BuiltinMetric::GvlWait => "gvlWait",
            BuiltinMetric::ErrorRate => "errorRate",
            BuiltinMetric::QueueTime => "queueTime",
            BuiltinMetric::Backlog => "backlog",
            BuiltinMetric::ThreadUtilization => "threadUtilization",
            BuiltinMetric::Headroom => "headroom",
            BuiltinMetric::DbPoolWait => "dbPoolWait",
            BuiltinMetric::CpuUtilization => "cpuUtilization",
            BuiltinMetric::MemoryGrowth => "memoryGrowth",
            BuiltinMetric::TimeToLimit => "timeToLimit",
            BuiltinMetric::EventLoopLag => "eventLoopLag",
        }
    }
}

/// One comparison: a built-in `metric` or a custom `query`, with absolute and/or relative limits.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.metric) != has(self.query)").message("set exactly one of metric or query").field_path(".metric"),
    validation = Rule::new("has(self.min) || has(self.max) || has(self.maxIncrease) || has(self.minImprovement)").message("a check needs at least one of min, max, maxIncrease or minImprovement").field_path(".max").reason(kube::core::Reason::FieldValueRequired),
    validation = Rule::new("!has(self.quantile) || (has(self.metric) && (self.metric == 'latency' || self.metric == 'queueTime'))").message("quantile is only valid for metric: latency or queueTime").field_path(".quantile").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.metric) || self.metric != 'headroom' || !has(self.maxIncrease)").message("headroom is judged by min (or max), not maxIncrease: it is the candidate's own margin to its estimated capacity").field_path(".maxIncrease").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.metric) || self.metric != 'headroom' || !has(self.minImprovement)").message("headroom is judged by min (or max), not minImprovement: higher is better for it, and minImprovement asks for a lower value").field_path(".minImprovement").reason(kube::core::Reason::FieldValueForbidden)
)]
pub struct Check {
    /// Defaults to the metric's name; required for custom queries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_-]{0,62}$"), length(max = 63))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<BuiltinMetric>,
    /// Custom PromQL returning one value; `{{namespace}}`, `{{pods}}`, `{{interval}}`,
    /// `{{container}}` are filled in per variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub query: Option<String>,
    /// Quantile for `latency` and `queueTime`, default 0.99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.01, max = 0.9999))]
    pub quantile: Option<f64>,
    /// The candidate must be at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Limit>,
    /// The candidate must be at most this (`500ms`, `15%`, `512Mi`, `5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Limit>,
    /// The candidate may exceed the baseline of the same interval by at most this share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub max_increase: Option<String>,
    /// Promotion needs the candidate this much below the baseline (lower is better), e.g.
    /// `"30%"` (seed 004's rule for Falcon's P95): judged over the experiment's intervals once
    /// every stage has passed; unmet, the experiment rolls back with reason `NotImproved` (held
    /// for approval with `promotion: manual`). Stages only, not a selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub min_improvement: Option<String>,
}

impl Check {
    /// The name shown in status and used as the metric label.
    pub fn display_name(&self) -> String {
        match (&self.name, self.metric) {
            (Some(n), _) => n.clone(),
            (None, Some(m)) => m.name().to_string(),
            (None, None) => "custom".into(),
        }
    }
}

/// Most per-interval samples a statistical test can have: the analyses kept in status and the
/// current one.
pub const MAX_MIN_SAMPLES: i32 = super::status::KEPT_ANALYSES as i32 + 1;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Statistical {
    /// Significance level of the one-sided Mann-Whitney U test.
    #[serde(default = "default_alpha")]
    #[schemars(range(min = 0.0001, max = 0.5))]
    pub alpha: f64,
    /// Samples per variant before the test is applied, at most 11: the samples are the last
    /// 10 analyses kept in status and the current one.
    #[serde(default = "default_min_samples")]
    #[schemars(range(min = 3))]
    #[x_kube(validation = Rule::new(format!("self <= {MAX_MIN_SAMPLES}")).message(kube::core::Message::Message(format!("minSamples must be at most {MAX_MIN_SAMPLES}: the samples are the last {} analyses kept in status and the current one, so a larger value never tests", MAX_MIN_SAMPLES - 1))))]
    pub min_samples: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationSpec {
    /// Smallest gain of one more thread that is still worth it.
    #[serde(default = "default_min_gain")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub min_gain: String,
    /// I/O share above which an async server is advised.
    #[serde(default = "default_async_above")]
    #[schemars(regex(pattern = PERCENT_PATTERN))]
    pub async_above: String,
}

impl Default for RecommendationSpec {
    fn default() -> Self {
        Self {
            min_gain: default_min_gain(),
            async_above: default_async_above(),
        }
    }
}

fn default_interval() -> String {
    "1m".into()
}
fn default_failure_limit() -> i32 {
    1
}
fn default_inconclusive_limit() -> i32 {
    3
}
fn default_min_requests() -> i64 {
    50
}
fn default_false_rollback_rate() -> String {
    "5%".into()
}
fn default_alpha() -> f64 {
    0.05
}
fn default_min_samples() -> i32 {
    5
}
fn default_max_predicted_utilization() -> String {
    "85%".into()
}
fn default_min_gain() -> String {
    "5%".into()
}
/// Seed 000 saw Falcon ahead on short DB queries already (4 processes, +62 %); seed 004 on
/// I/O-heavy apps generally. 95 % advised it only for apps that barely run Ruby.
fn default_async_above() -> String {
    "80%".into()
}
