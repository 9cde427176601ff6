//! Analysis: render each check's PromQL per variant, ask Prometheus, judge the candidate
//! against limits and the baseline, and derive a thread-count recommendation and a capacity
//! estimate.
//!
//! Everything but `prometheus` and `run` is pure: rendering, judgement, statistics and the
//! recommendation are plain functions with plain tests.

pub mod capacity;
pub mod judge;
pub mod prometheus;
pub mod queries;
pub mod recommend;
pub mod run;
pub mod stats;
pub mod template;

pub use capacity::{
    candidate_config, config_capacity, cpu_cores, cpu_limit, headroom, load_per_pod, pod_capacity,
    predict, variant_capacity, worker_capacity, Bound, Capacity, PerRequest, Prediction,
};
pub use judge::{aggregate, judge_check, Limits, Unit};
pub use prometheus::{PrometheusClient, PrometheusError, QueryTimer, DEFAULT_TIMEOUT};
pub use queries::{
    builtin_template, busiest_pod_rate_template, cpu_per_request_template, io_per_request_template,
    io_share_template, requests_template, total_rate_template, validate_names, QueryError,
};
pub use recommend::{
    amdahl_speedup, recommend, recommend_from_spec, recommendation_table, recommended_threads,
};
pub use run::{
    analyse, check_template, client_for, reference_baseline, validate, AnalysisContext,
    AnalysisSpecError,
};
pub use stats::{compare, mann_whitney_greater, samples, MannWhitney};
pub use template::{
    escape_label_value, escape_regex, pods_regex, pods_regex_any, render, TemplateError,
    TemplateVars,
};
