//! Per-experiment series: stage, weights, phase, analysis counts, the latest check values, and
//! a counter of the stage analyses by verdict (what a report marks for analyses status no
//! longer keeps).
//!
//! These are the one place where an object name becomes a label. The series count is bounded
//! by the number of experiment objects (times the checks in each spec, at most 32): every
//! series of an experiment is removed when it is deleted, and a finished experiment's series
//! are removed once it has been finished for [`FINISHED_RETENTION`], so a cluster that ran
//! thousands of experiments over a year does not keep exporting them.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::api::{ConcurrencyExperimentStatus, Verdict};

/// How long a finished experiment keeps its series: long enough for a dashboard to show how
/// it ended, short enough that old experiments do not pile up.
pub const FINISHED_RETENTION: Duration = Duration::from_secs(6 * 3600);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExpLabels {
    namespace: String,
    experiment: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WeightLabels {
    namespace: String,
    experiment: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    namespace: String,
    experiment: String,
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckValueLabels {
    namespace: String,
    experiment: String,
    check: String,
    variant: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    namespace: String,
    experiment: String,
    verdict: &'static str,
}

const VERDICTS: [Verdict; 3] = [Verdict::Pass, Verdict::Fail, Verdict::Inconclusive];

type FloatGauge = Gauge<f64, AtomicU64>;

/// The label sets that vary per experiment, so a later update (or the removal) can drop the
/// ones that no longer apply.
#[derive(Default)]
struct Emitted {
    phase: Option<&'static str>,
    checks: Vec<(String, &'static str)>,
}

#[derive(Clone, Default)]
pub(super) struct ExperimentGauges {
    stage_index: Family<ExpLabels, Gauge>,
    weight: Family<WeightLabels, Gauge>,
    phase: Family<PhaseLabels, Gauge>,
    failed: Family<ExpLabels, Gauge>,
    inconclusive: Family<ExpLabels, Gauge>,
    check_value: Family<CheckValueLabels, FloatGauge>,
    analyses: Family<VerdictLabels, Counter>,
    emitted: Arc<Mutex<HashMap<(String, String), Emitted>>>,
}

impl ExperimentGauges {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "concurrency_experiment_stage_index",
            "Index of the experiment's current stage (0 = first)",
            self.stage_index.clone(),
        );
        registry.register(
            "concurrency_experiment_weight",
            "Candidate traffic weight in percent: planned by the stage, or effective (the split in force)",
            self.weight.clone(),
        );
        registry.register(
            "concurrency_experiment_phase",
            "1 for the experiment's current phase",
            self.phase.clone(),
        );
        registry.register(
            "concurrency_experiment_failed_analyses",
            "Failed analyses so far in the experiment",
            self.failed.clone(),
        );
        registry.register(
            "concurrency_experiment_inconclusive_analyses",
            "Inconclusive analyses so far in the experiment",
            self.inconclusive.clone(),
        );
        registry.register(
            "concurrency_experiment_check_value",
            "Value of each check per variant in the experiment's latest analysis",
            self.check_value.clone(),
        );
        registry.register(
            "concurrency_experiment_analyses",
            "Stage analyses evaluated for the experiment by this process, by verdict",
            self.analyses.clone(),
        );
    }

    fn emitted(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Emitted>> {
        match self.emitted.lock() {
            Ok(e) => e,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub(super) fn set(&self, namespace: &str, name: &str, status: &ConcurrencyExperimentStatus) {
        let exp = ExpLabels {
            namespace: namespace.to_owned(),
            experiment: name.to_owned(),
        };
        let mut emitted = self.emitted();
        let emitted = emitted
            .entry((namespace.to_owned(), name.to_owned()))
            .or_default();

        match status.stage_index {
            Some(i) => {
                self.stage_index.get_or_create(&exp).set(i64::from(i));
            }
            None => {
                self.stage_index.remove(&exp);
            }
        }
        for (kind, value) in [
            ("planned", status.planned_weight),
            ("effective", status.effective_weight),
        ] {
            self.weight
                .get_or_create(&self.weight_labels(&exp, kind))
                .set(i64::from(value));
        }
        let phase = status.phase.as_str();
        if let Some(old) = emitted.phase.filter(|old| *old != phase) {
            self.phase.remove(&phase_labels(&exp, old));
        }
        self.phase.get_or_create(&phase_labels(&exp, phase)).set(1);
        emitted.phase = Some(phase);
        self.failed
            .get_or_create(&exp)
            .set(i64::from(status.failed_analyses));
        self.inconclusive
            .get_or_create(&exp)
            .set(i64::from(status.inconclusive_analyses));
        // Exported from 0 before the first analysis, so the first one is a visible rise.
        for verdict in VERDICTS {
            let _ = self.analyses.get_or_create(&verdict_labels(&exp, verdict));
        }

        // Only values the latest analysis has; a check without data has no series rather than
        // an old value that looks current.
        let mut checks = Vec::new();
        for check in status.analyses.last().map_or(&[][..], |a| &a.checks[..]) {
            for (variant, value) in [("baseline", check.baseline), ("candidate", check.candidate)] {
                if let Some(v) = value.filter(|v| v.is_finite()) {
                    self.check_value
                        .get_or_create(&check_labels(&exp, &check.name, variant))
                        .set(v);
                    checks.push((check.name.clone(), variant));
                }
            }
        }
        for (check, variant) in &emitted.checks {
            if !checks.iter().any(|(c, v)| c == check && v == variant) {
                self.check_value.remove(&check_labels(&exp, check, variant));
            }
        }
        emitted.checks = checks;
    }

    /// Counts one stage analysis of the experiment.
    pub(super) fn count_analysis(&self, namespace: &str, name: &str, verdict: Verdict) {
        let exp = ExpLabels {
            namespace: namespace.to_owned(),
            experiment: name.to_owned(),
        };
        self.analyses
            .get_or_create(&verdict_labels(&exp, verdict))
            .inc();
    }

    pub(super) fn remove(&self, namespace: &str, name: &str) {
        let exp = ExpLabels {
            namespace: namespace.to_owned(),
            experiment: name.to_owned(),
        };
        let emitted = self
            .emitted()
            .remove(&(namespace.to_owned(), name.to_owned()))
            .unwrap_or_default();
        self.stage_index.remove(&exp);
        for kind in ["planned", "effective"] {
            self.weight.remove(&self.weight_labels(&exp, kind));
        }
        if let Some(phase) = emitted.phase {
            self.phase.remove(&phase_labels(&exp, phase));
        }
        self.failed.remove(&exp);
        self.inconclusive.remove(&exp);
        for verdict in VERDICTS {
            self.analyses.remove(&verdict_labels(&exp, verdict));
        }
        for (check, variant) in &emitted.checks {
            self.check_value.remove(&check_labels(&exp, check, variant));
        }
    }

    /// Removes the series of every experiment `keep` says no longer exists.
    pub(super) fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        let gone: Vec<(String, String)> = self
            .emitted()
            .keys()
            .filter(|(ns, name)| !keep(ns, name))
            .cloned()
            .collect();
        for (ns, name) in gone {
            self.remove(&ns, &name);
        }
    }

    fn weight_labels(&self, exp: &ExpLabels, kind: &'static str) -> WeightLabels {
        WeightLabels {
            namespace: exp.namespace.clone(),
            experiment: exp.experiment.clone(),
            kind,
        }
    }
}

fn phase_labels(exp: &ExpLabels, phase: &'static str) -> PhaseLabels {
    PhaseLabels {
        namespace: exp.namespace.clone(),
        experiment: exp.experiment.clone(),
        phase,
    }
}

fn verdict_labels(exp: &ExpLabels, verdict: Verdict) -> VerdictLabels {
    VerdictLabels {
        namespace: exp.namespace.clone(),
        experiment: exp.experiment.clone(),
        verdict: verdict.as_str(),
    }
}

fn check_labels(exp: &ExpLabels, check: &str, variant: &'static str) -> CheckValueLabels {
    CheckValueLabels {
        namespace: exp.namespace.clone(),
        experiment: exp.experiment.clone(),
        check: check.to_owned(),
        variant,
    }
}

/// Whether an experiment's series should still be exported at `now`: yes unless it finished
/// (promoted, rolled back, invalid) more than [`FINISHED_RETENTION`] ago. The finish time is
/// the decision's, or for an Invalid spec the latest condition transition.
pub fn keeps_series(status: &ConcurrencyExperimentStatus, now: jiff::Timestamp) -> bool {
    if !status.phase.is_terminal() {
        return true;
    }
    let finished = status.decision.as_ref().map(|d| d.at.0).or_else(|| {
        status
            .conditions
            .iter()
            .map(|c| c.last_transition_time.0)
            .max()
    });
    let Some(finished) = finished else {
        return true;
    };
    let retention =
        jiff::SignedDuration::try_from(FINISHED_RETENTION).unwrap_or(jiff::SignedDuration::MAX);
    now.duration_since(finished) < retention
}
