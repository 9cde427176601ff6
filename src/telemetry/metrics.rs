//! The operator's own Prometheus metrics.
//!
//! Labels are low-cardinality on purpose: phases, verdicts, check kinds and short error/reason
//! categories only. Pod names never become labels. The one exception is the per-experiment
//! gauges (`concurrency_experiment_*`, see `experiment_metrics`): they carry namespace and
//! experiment, bounded by the experiment objects that exist, and are removed with them.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::experiment_metrics::ExperimentGauges;
use crate::api::{BuiltinMetric, ConcurrencyExperimentStatus, Phase, Verdict};

/// Every phase, so that `set_experiment_phases` can reset phases that no longer have experiments.
pub const ALL_PHASES: [Phase; 9] = [
    Phase::Pending,
    Phase::Selecting,
    Phase::Progressing,
    Phase::Paused,
    Phase::Promoting,
    Phase::Succeeded,
    Phase::RollingBack,
    Phase::RolledBack,
    Phase::Invalid,
];

/// Label value used when a caller passes something that is not a short category.
pub const OTHER_CATEGORY: &str = "Other";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    check_kind: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotificationLabels {
    sink: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    category: String,
}

/// Cheap to clone: all clones share the same registry and series.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    experiments: Family<PhaseLabels, Gauge>,
    analyses: Family<VerdictLabels, Counter>,
    check_results: Family<CheckLabels, Counter>,
    rollbacks: Family<ReasonLabels, Counter>,
    promotions: Counter,
    reconcile_duration: Histogram,
    reconcile_errors: Family<CategoryLabels, Counter>,
    prometheus_query_duration: Histogram,
    leader: Gauge,
    notifications: Family<NotificationLabels, Counter>,
    per_experiment: ExperimentGauges,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let experiments = Family::<PhaseLabels, Gauge>::default();
        let analyses = Family::<VerdictLabels, Counter>::default();
        let check_results = Family::<CheckLabels, Counter>::default();
        let rollbacks = Family::<ReasonLabels, Counter>::default();
        let promotions = Counter::default();
        // 1 ms .. ~16 s: a reconcile is a handful of API calls plus Prometheus queries.
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        let reconcile_errors = Family::<CategoryLabels, Counter>::default();
        // 5 ms .. ~20 s: PromQL over an interval range on a busy Prometheus.
        let prometheus_query_duration = Histogram::new(exponential_buckets(0.005, 2.0, 13));
        let leader = Gauge::default();
        let notifications = Family::<NotificationLabels, Counter>::default();
        let per_experiment = ExperimentGauges::default();

        registry.register(
            "concurrency_experiments",
            "Experiments by phase",
            experiments.clone(),
        );
        // Counters get `_total` appended by the encoder.
        registry.register(
            "concurrency_analyses",
            "Analyses evaluated, by verdict",
            analyses.clone(),
        );
        registry.register(
            "concurrency_check_results",
            "Check results, by check kind and verdict",
            check_results.clone(),
        );
        registry.register(
            "concurrency_rollbacks",
            "Rollbacks, by reason category",
            rollbacks.clone(),
        );
        registry.register(
            "concurrency_promotions",
            "Candidates promoted into their target",
            promotions.clone(),
        );
        registry.register(
            "concurrency_reconcile_duration_seconds",
            "Time spent in one reconcile",
            reconcile_duration.clone(),
        );
        registry.register(
            "concurrency_reconcile_errors",
            "Reconcile errors, by error category",
            reconcile_errors.clone(),
        );
        registry.register(
            "concurrency_prometheus_query_duration_seconds",
            "Time spent in one Prometheus query",
            prometheus_query_duration.clone(),
        );
        registry.register(
            "concurrency_leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        registry.register(
            "concurrency_notifications",
            "Notifications by sink and result (sent, failed after its retries, dropped)",
            notifications.clone(),
        );
        per_experiment.register(&mut registry);

        Self {
            registry: Arc::new(registry),
            experiments,
            analyses,
            check_results,
            rollbacks,
            promotions,
            reconcile_duration,
            reconcile_errors,
            prometheus_query_duration,
            leader,
            notifications,
            per_experiment,
        }
    }

    /// Sets the per-phase gauge from the phases of all experiments currently known; phases
    /// without experiments are set to 0 so a finished phase does not keep its old count.
    pub fn set_experiment_phases(&self, phases: impl IntoIterator<Item = Phase>) {
        let mut counts = [0i64; ALL_PHASES.len()];
        for phase in phases {
            if let Some(i) = ALL_PHASES.iter().position(|p| *p == phase) {
                counts[i] += 1;
            }
        }
        for (phase, count) in ALL_PHASES.iter().zip(counts) {
            self.experiments
                .get_or_create(&PhaseLabels {
                    phase: phase.as_str(),
                })
                .set(count);
        }
    }

    pub fn record_analysis(&self, verdict: Verdict) {
        self.analyses
            .get_or_create(&VerdictLabels {
                verdict: verdict.as_str(),
            })
            .inc();
    }

    /// `metric` is the check's built-in metric; `None` is a custom PromQL check.
    pub fn record_check_result(&self, metric: Option<BuiltinMetric>, verdict: Verdict) {
        let check_kind = metric.map_or("custom", BuiltinMetric::name);
        self.check_results
            .get_or_create(&CheckLabels {
                check_kind,
                verdict: verdict.as_str(),
            })
            .inc();
    }

    /// `reason` is the decision's short category (`CheckFailed`, `InconclusiveLimit`,
    /// `Aborted`, `Deleted`, …); anything else is counted as `Other`.
    pub fn record_rollback(&self, reason: &str) {
        self.rollbacks
            .get_or_create(&ReasonLabels {
                reason: category_label(reason),
            })
            .inc();
    }

    pub fn record_promotion(&self) {
        self.promotions.inc();
    }

    pub fn observe_reconcile(&self, elapsed: Duration) {
        self.reconcile_duration.observe(elapsed.as_secs_f64());
    }

    /// `category` is the error's `category()`; anything else is counted as `Other`.
    pub fn record_reconcile_error(&self, category: &str) {
        self.reconcile_errors
            .get_or_create(&CategoryLabels {
                category: category_label(category),
            })
            .inc();
    }

    pub fn observe_prometheus_query(&self, elapsed: Duration) {
        self.prometheus_query_duration
            .observe(elapsed.as_secs_f64());
    }

    pub fn set_leader(&self, is_leader: bool) {
        self.leader.set(i64::from(is_leader));
    }

    /// `sink`: `webhook`, `slack`; `result`: `sent`, `failed` (after its retries), `dropped`
    /// (queue full).
    pub fn record_notification(&self, sink: &'static str, result: &'static str) {
        self.notifications
            .get_or_create(&NotificationLabels { sink, result })
            .inc();
    }

    /// Sets the `concurrency_experiment_*` gauges of one experiment from its status.
    pub fn set_experiment(
        &self,
        namespace: &str,
        name: &str,
        status: &ConcurrencyExperimentStatus,
    ) {
        self.per_experiment.set(namespace, name, status);
    }

    /// Counts one stage analysis of the experiment (after its status was stored).
    pub fn count_experiment_analysis(&self, namespace: &str, name: &str, verdict: Verdict) {
        self.per_experiment.count_analysis(namespace, name, verdict);
    }

    /// Drops every `concurrency_experiment_*` series of one experiment.
    pub fn remove_experiment(&self, namespace: &str, name: &str) {
        self.per_experiment.remove(namespace, name);
    }

    /// Drops the `concurrency_experiment_*` series of experiments for which `exists` is false.
    pub fn retain_experiments(&self, exists: impl Fn(&str, &str) -> bool) {
        self.per_experiment.retain(exists);
    }

    /// OpenMetrics text exposition, ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error here could only come from a broken
        // metric implementation, and an empty scrape is the honest answer then.
        if let Err(err) = encode(&mut out, &self.registry) {
            tracing::error!(error = %err, "encoding metrics failed");
            out.clear();
        }
        out
    }
}

/// Keeps a label value only if it looks like a short category (UpperCamelCase, as Event
/// reasons are). Kubernetes object names are lowercase DNS labels, so an experiment or pod
/// name passed here by mistake can never become a series of its own.
fn category_label(value: &str) -> String {
    let mut chars = value.chars();
    let looks_like_category = value.len() <= 40
        && chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if looks_like_category {
        value.to_owned()
    } else {
        OTHER_CATEGORY.to_owned()
    }
}
