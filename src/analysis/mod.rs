//! Analysis: render each check's PromQL per variant, read the values from a `MetricSource`,
//! judge the candidate against limits and the baseline, and derive a thread-count
//! recommendation and a capacity estimate.
//!
//! No I/O here: the numbers come through the `MetricSource` trait (`source`), which
//! `crate::prometheus` implements for the operator and a table implements in the tests, so
//! every rule — also those at 100 % weight — is a plain unit test.

mod anytime;
pub mod capacity;
mod capacity_measure;
pub mod capacity_queries;
mod check;
mod context;
mod evaluate;
pub mod improvement;
pub mod judge;
pub mod preflight;
pub mod queries;
pub(crate) mod queue_header;
pub mod reach;
pub mod recommend;
mod reference;
mod restarts;
mod selection;
pub mod sequential;
mod source;
pub mod stats;
mod summary;
pub mod template;
mod validate;
mod workers;

pub use anytime::{sequential_bounds, test_alpha};
pub use capacity::{
    candidate_config, choose_io_share, choose_times, config_capacity, cpu_cores, cpu_limit,
    headroom, load_per_pod, pod_capacity, predict, variant_capacity, worker_capacity, Bound,
    Capacity, ChosenTimes, GvlTimes, PerRequest, Prediction, StandardTimes,
};
pub use capacity_queries::{
    busiest_pod_rate_template, container_cpu_per_request_template, cpu_per_request_template,
    io_per_request_template, io_share_template, total_rate_template, wall_per_request_template,
};
pub use context::AnalysisContext;
pub use evaluate::{analyse, AnalysisOutcome};
pub use judge::{aggregate, judge_check, Limits, Unit};
pub use preflight::{preflight, Finding, Preflight};
pub use queries::{
    builtin_template, is_headroom, requests_template, validate_names, QueryError, HEADROOM_SOURCE,
};
pub use recommend::{
    amdahl_speedup, recommend, recommend_from_spec, recommendation_table, recommended_threads,
};
pub use reference::{last_baseline, reference_baseline};
pub use restarts::{judge_restarts, restarts, Restart, Restarts, RESTARTS_CHECK};
pub use selection::{
    analyse_selection, baseline_values, objective, unreachable_selection, CandidateAnalysis,
    CandidateToJudge, Objective, SelectionAnalysis, SelectionContext,
};
pub use source::{MetricSource, PrometheusError};
pub use stats::{compare, mann_whitney_greater, samples, MannWhitney};
pub use summary::{check_query, SummaryError};
pub use template::{
    escape_label_value, escape_regex, pods_regex, pods_regex_any, render, TemplateError,
    TemplateVars,
};
pub use validate::{check_template, validate, AnalysisSpecError};
pub use workers::{
    check_workers, judge_workers, measure_event_loops, EventLoops, TOLERANCE as WORKERS_TOLERANCE,
    WORKERS_CHECK,
};

#[cfg(test)]
mod tests;
