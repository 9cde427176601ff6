//! Shared by the analysis tests: specs from YAML and a metric source that answers from a table.

use std::sync::Mutex;

use jiff::Timestamp;

use crate::analysis::{AnalysisContext, MetricSource, PrometheusError};
use crate::api::{Analysis, ConcurrencyExperimentSpec, RenderedServer, ServerKind};

/// `spec.analysis` with these checks (YAML flow list), a Prometheus URL and a 1m interval.
pub(super) fn analysis(checks: &str) -> Analysis {
    serde_yaml::from_str(&format!(
        "prometheus: {{url: http://p:9090}}\ninterval: 1m\nchecks: {checks}\n"
    ))
    .unwrap()
}

/// A spec whose analysis has these checks, `minRequests: 50`, for target `storefront` and a
/// Puma 2×4 candidate.
pub(super) fn spec(checks: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        "targetRef: {{name: storefront}}\n\
         candidate: {{server: puma, workers: 2, threads: 4}}\n\
         stages: [{{weight: 50, duration: 1m}}, {{weight: 100, duration: 1m}}]\n\
         analysis:\n  prometheus: {{url: \"http://p:9090\"}}\n  interval: 1m\n  minRequests: 50\n  checks: {checks}\n"
    ))
    .unwrap()
}

/// An analysis of `storefront` (Puma 2×6, no CPU limit) and `storefront-candidate` at `weight`.
pub(super) fn context(weight: i32) -> AnalysisContext {
    AnalysisContext {
        namespace: "shop".into(),
        container: "web".into(),
        baseline_deployment: "storefront".into(),
        candidate_deployment: "storefront-candidate".into(),
        stage_index: 1,
        stage_started_at: None,
        weight,
        now: Timestamp::UNIX_EPOCH,
        baseline_config: Some(RenderedServer {
            server: ServerKind::Puma,
            workers: Some(2),
            threads: Some(6),
            ..RenderedServer::default()
        }),
        baseline_cpu_limit: None,
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}

/// What a query asks, told apart by the shape of the default templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Requests,
    Latency,
    IoShare,
    CpuPerRequest,
    IoPerRequest,
    BusiestPod,
    TotalRate,
    /// Standard metrics: the container's CPU seconds over the requests.
    ContainerCpu,
    /// Standard metrics: the request-duration `_sum / _count`.
    WallPerRequest,
    /// The event-loop probe's rate per pod: the busiest and the emptiest pod.
    EventLoopsMax,
    EventLoopsMin,
    Other,
}

/// Whose pods a query selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variant {
    Baseline,
    Candidate,
    Both,
}

fn kind(q: &str) -> Kind {
    let io = "sum(rate(ruby_io_wait_seconds_total";
    if q.starts_with("sum(increase(rails_requests_total") {
        Kind::Requests
    } else if q.contains("rails_request_duration_seconds_bucket") {
        Kind::Latency
    } else if q.starts_with(io) && q.contains("ruby_running_seconds_total") {
        Kind::IoShare
    } else if q.starts_with(io) {
        Kind::IoPerRequest
    } else if q.starts_with("sum(rate(ruby_running_seconds_total") {
        Kind::CpuPerRequest
    } else if q.starts_with("max(sum by (pod) (rate(ruby_event_loop_probe_seconds_total") {
        Kind::EventLoopsMax
    } else if q.starts_with("min(sum by (pod) (rate(ruby_event_loop_probe_seconds_total") {
        Kind::EventLoopsMin
    } else if q.starts_with("max(sum by (pod)") {
        Kind::BusiestPod
    } else if q.starts_with("sum(rate(rails_requests_total") {
        Kind::TotalRate
    } else if q.starts_with("sum(rate(container_cpu_usage_seconds_total") {
        Kind::ContainerCpu
    } else if q.starts_with("sum(rate(rails_request_duration_seconds_sum")
        && q.contains("rails_request_duration_seconds_count")
    {
        Kind::WallPerRequest
    } else {
        Kind::Other
    }
}

fn variant(q: &str) -> Variant {
    if q.contains("^(?:") {
        Variant::Both
    } else if q.contains("storefront-candidate-") {
        Variant::Candidate
    } else {
        Variant::Baseline
    }
}

type Answer = Result<Option<f64>, PrometheusError>;

/// A `MetricSource` that answers each query from `answer(kind, variant)` and remembers what was
/// asked: the analysis' rules without a Prometheus.
pub(super) struct FakeSource {
    answer: Box<dyn Fn(Kind, Variant) -> Answer + Send + Sync>,
    pub(super) asked: Mutex<Vec<(Kind, Variant)>>,
}

impl FakeSource {
    pub(super) fn new(answer: impl Fn(Kind, Variant) -> Answer + Send + Sync + 'static) -> Self {
        Self {
            answer: Box::new(answer),
            asked: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn was_asked(&self, kind: Kind, variant: Variant) -> bool {
        self.asked.lock().unwrap().contains(&(kind, variant))
    }
}

impl MetricSource for FakeSource {
    async fn query_value(&self, promql: &str, _at: Timestamp) -> Answer {
        let q = (kind(promql), variant(promql));
        self.asked.lock().unwrap().push(q);
        (self.answer)(q.0, q.1)
    }
}

/// A histogram as Prometheus answers `sum by (le)`: each bound's cumulative count, then `+Inf`.
pub(super) fn le_pairs(h: &crate::analysis::sequential::Buckets) -> Vec<(String, f64)> {
    h.bounds
        .iter()
        .zip(&h.cumulative)
        .map(|(le, c)| (le.to_string(), *c))
        .chain([("+Inf".to_string(), h.total)])
        .collect()
}
