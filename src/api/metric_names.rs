//! `spec.analysis.metrics`: which exporter the app runs (a preset) and any names that differ
//! from it, resolved into the names the built-in checks put into their queries.
//!
//! The presets are the exact series each exporter writes, read from its source (see
//! docs/experiment-reference.md, "Exporter presets"): yabeda-rails, yabeda-rack-queue and
//! yabeda-puma-plugin through yabeda-prometheus (`<group>_<name>_<unit>`), Discourse's
//! prometheus_exporter (`ruby_` prefix), and this project's reference images.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The app's exporter, whose exact series the built-in checks read; names set next to it
/// override its names. Without one: `referenceApp`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MetricPreset {
    /// yabeda-rails, yabeda-rack-queue and yabeda-puma-plugin via yabeda-prometheus.
    Yabeda,
    /// Discourse's prometheus_exporter (web and puma collectors, default `ruby_` prefix).
    PrometheusExporter,
    /// This project's reference images and gvl-sim (the names used without a preset).
    ReferenceApp,
}

impl MetricPreset {
    pub fn name(self) -> &'static str {
        match self {
            MetricPreset::Yabeda => "yabeda",
            MetricPreset::PrometheusExporter => "prometheusExporter",
            MetricPreset::ReferenceApp => "referenceApp",
        }
    }
}

/// As written in the spec: a preset, and names that override it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSpec {
    /// The app's exporter; every name below that is set overrides the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<MetricPreset>,
    /// Request-duration histogram (without `_bucket`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_duration: Option<String>,
    /// Request counter with a status label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_total: Option<String>,
    /// The status label on the request counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gvl_wait_seconds: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_wait_seconds: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_seconds: Option<String>,
    /// Request queue-time histogram (without `_bucket`): load balancer's `X-Request-Start`
    /// to the app picking the request up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_time: Option<String>,
    /// Working-set memory per container (cAdvisor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPU seconds per container, a counter (cAdvisor's `container_cpu_usage_seconds_total`):
    /// the capacity model's CPU per request where the GVL counters have no data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usage: Option<String>,
    /// Counter of seconds requests waited for a DB connection (`dbPoolWait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool_wait_seconds: Option<String>,
    /// Counter of seconds an async server's event loop ran its timers late (`eventLoopLag`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_loop_lag_seconds: Option<String>,
    /// Counter of seconds the lag probe's timers covered: `eventLoopLag`'s denominator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_loop_probe_seconds: Option<String>,
    /// Puma gauge: requests waiting for a thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
    /// Puma gauge: busy threads (Puma counts the backlog in, so busy / max can pass 100%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_threads: Option<String>,
    /// Puma gauge: threads free to take a request (busy = max − this, when there is no
    /// busy-threads gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_capacity: Option<String>,
    /// Puma gauge: the thread pool's maximum size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<String>,
}

/// The names the queries use, after the preset and the overrides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricNames {
    pub request_duration: String,
    pub requests_total: String,
    pub status_label: String,
    pub gvl_wait_seconds: String,
    pub io_wait_seconds: String,
    pub running_seconds: String,
    pub queue_time: String,
    pub memory: String,
    pub cpu_usage: String,
    pub db_pool_wait_seconds: String,
    pub event_loop_lag_seconds: String,
    pub event_loop_probe_seconds: String,
    pub backlog: String,
    /// `None`: the exporter has no busy-threads gauge; busy is max − pool capacity.
    pub busy_threads: Option<String>,
    pub pool_capacity: String,
    pub max_threads: String,
    /// `requestDuration` and `queueTime` may be Summaries (prometheus_exporter without
    /// `--histogram`): the quantile checks look at the type before they query.
    #[serde(skip)]
    pub may_be_summaries: bool,
}

/// The reference images' names, which were the only defaults before presets existed.
impl Default for MetricNames {
    fn default() -> Self {
        MetricNames::of(MetricPreset::ReferenceApp)
    }
}

fn s(v: &str) -> String {
    v.to_string()
}

impl MetricNames {
    /// Every name of one preset.
    pub fn of(preset: MetricPreset) -> MetricNames {
        // The GVL/I/O/running counters come from the reference images' instrumentation (or
        // gvl-sim); neither yabeda nor prometheus_exporter has them, so every preset keeps
        // those names. Memory and CPU are cAdvisor's whatever the app runs.
        let reference = MetricNames {
            request_duration: s("rails_request_duration_seconds"),
            requests_total: s("rails_requests_total"),
            status_label: s("status"),
            gvl_wait_seconds: s("ruby_gvl_wait_seconds_total"),
            io_wait_seconds: s("ruby_io_wait_seconds_total"),
            running_seconds: s("ruby_running_seconds_total"),
            queue_time: s("rails_request_queue_time_seconds"),
            memory: s("container_memory_working_set_bytes"),
            cpu_usage: s("container_cpu_usage_seconds_total"),
            // The concurrency-metrics gem's (and the reference images') name in every preset:
            // yabeda-activerecord has only gauges of waiting threads, no time.
            db_pool_wait_seconds: s("ruby_db_pool_wait_seconds_total"),
            // The gem's and the reference async server's lag probe, in every preset.
            event_loop_lag_seconds: s("ruby_event_loop_lag_seconds_total"),
            event_loop_probe_seconds: s("ruby_event_loop_probe_seconds_total"),
            backlog: s("puma_backlog"),
            // The reference images' `puma_running` is Puma's spawned threads, not busy ones.
            busy_threads: None,
            pool_capacity: s("puma_pool_capacity"),
            max_threads: s("puma_max_threads"),
            may_be_summaries: false,
        };
        match preset {
            MetricPreset::ReferenceApp => reference,
            MetricPreset::Yabeda => MetricNames {
                queue_time: s("rack_queue_duration_seconds"),
                busy_threads: Some(s("puma_busy_threads")),
                ..reference
            },
            MetricPreset::PrometheusExporter => MetricNames {
                request_duration: s("ruby_http_request_duration_seconds"),
                requests_total: s("ruby_http_requests_total"),
                queue_time: s("ruby_http_request_queue_duration_seconds"),
                backlog: s("ruby_puma_request_backlog"),
                busy_threads: Some(s("ruby_puma_busy_threads")),
                pool_capacity: s("ruby_puma_thread_pool_capacity"),
                max_threads: s("ruby_puma_max_threads"),
                may_be_summaries: true,
                ..reference
            },
        }
    }
}

impl MetricsSpec {
    /// The preset's names with every name the spec sets in their place.
    pub fn resolve(&self) -> MetricNames {
        let base = MetricNames::of(self.preset.unwrap_or(MetricPreset::ReferenceApp));
        let pick = |over: &Option<String>, default: String| over.clone().unwrap_or(default);
        MetricNames {
            request_duration: pick(&self.request_duration, base.request_duration),
            requests_total: pick(&self.requests_total, base.requests_total),
            status_label: pick(&self.status_label, base.status_label),
            gvl_wait_seconds: pick(&self.gvl_wait_seconds, base.gvl_wait_seconds),
            io_wait_seconds: pick(&self.io_wait_seconds, base.io_wait_seconds),
            running_seconds: pick(&self.running_seconds, base.running_seconds),
            queue_time: pick(&self.queue_time, base.queue_time),
            memory: pick(&self.memory, base.memory),
            cpu_usage: pick(&self.cpu_usage, base.cpu_usage),
            db_pool_wait_seconds: pick(&self.db_pool_wait_seconds, base.db_pool_wait_seconds),
            event_loop_lag_seconds: pick(&self.event_loop_lag_seconds, base.event_loop_lag_seconds),
            event_loop_probe_seconds: pick(
                &self.event_loop_probe_seconds,
                base.event_loop_probe_seconds,
            ),
            backlog: pick(&self.backlog, base.backlog),
            busy_threads: self.busy_threads.clone().or(base.busy_threads),
            pool_capacity: pick(&self.pool_capacity, base.pool_capacity),
            max_threads: pick(&self.max_threads, base.max_threads),
            may_be_summaries: base.may_be_summaries,
        }
    }
}
