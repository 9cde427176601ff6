//! Per-experiment gauges: stage, weights, phase, analysis counts and the latest check values.
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
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::api::ConcurrencyExperimentStatus;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::telemetry::Metrics;

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    fn status(v: serde_json::Value) -> ConcurrencyExperimentStatus {
        serde_json::from_value(v).unwrap()
    }

    const EXP: &str = r#"namespace="shop",experiment="storefront""#;

    fn progressing() -> ConcurrencyExperimentStatus {
        status(json!({
            "phase": "Progressing", "stageIndex": 1, "plannedWeight": 70, "effectiveWeight": 67,
            "failedAnalyses": 1, "inconclusiveAnalyses": 2,
            "analyses": [
                {"at": "2026-11-30T01:00:00Z", "stageIndex": 0, "weight": 33, "verdict": "Pass",
                 "checks": [{"name": "memory", "query": "q", "limit": "l", "verdict": "Pass",
                             "baseline": 1.0, "candidate": 2.0}]},
                {"at": "2026-11-30T01:01:00Z", "stageIndex": 1, "weight": 67, "verdict": "Fail",
                 "checks": [
                    {"name": "latency", "query": "q", "limit": "l", "verdict": "Fail",
                     "baseline": 0.25, "candidate": 0.5},
                    {"name": "backlog", "query": "q", "limit": "l", "verdict": "Inconclusive",
                     "baseline": 3.0},
                 ]},
            ],
        }))
    }

    #[test]
    fn gauges_follow_the_status() {
        let m = Metrics::new();
        m.set_experiment("shop", "storefront", &progressing());
        let text = m.encode();
        let at = |name: &str, extra: &str| value(&text, &format!("{name}{{{EXP}{extra}}}"));
        assert_eq!(at("concurrency_experiment_stage_index", ""), Some(1.0));
        assert_eq!(
            at("concurrency_experiment_weight", r#",kind="planned""#),
            Some(70.0)
        );
        assert_eq!(
            at("concurrency_experiment_weight", r#",kind="effective""#),
            Some(67.0)
        );
        assert_eq!(
            at("concurrency_experiment_phase", r#",phase="Progressing""#),
            Some(1.0)
        );
        assert_eq!(at("concurrency_experiment_failed_analyses", ""), Some(1.0));
        assert_eq!(
            at("concurrency_experiment_inconclusive_analyses", ""),
            Some(2.0)
        );
        // The latest analysis only; a missing value has no series.
        let check = |c: &str, v: &str| {
            at(
                "concurrency_experiment_check_value",
                &format!(r#",check="{c}",variant="{v}""#),
            )
        };
        assert_eq!(check("latency", "baseline"), Some(0.25));
        assert_eq!(check("latency", "candidate"), Some(0.5));
        assert_eq!(check("backlog", "baseline"), Some(3.0));
        assert_eq!(check("backlog", "candidate"), None);
        assert_eq!(check("memory", "baseline"), None);
        assert!(text.contains("# TYPE concurrency_experiment_check_value gauge"));
    }

    #[test]
    fn an_update_drops_the_old_phase_and_checks() {
        let m = Metrics::new();
        m.set_experiment("shop", "storefront", &progressing());
        let mut next = progressing();
        next.phase = crate::api::Phase::RollingBack;
        next.analyses.last_mut().unwrap().checks.truncate(1);
        next.stage_index = None;
        m.set_experiment("shop", "storefront", &next);
        let text = m.encode();
        assert!(!text.contains(r#"phase="Progressing""#), "{text}");
        assert_eq!(
            value(
                &text,
                &format!(r#"concurrency_experiment_phase{{{EXP},phase="RollingBack"}}"#)
            ),
            Some(1.0)
        );
        assert!(!text.contains(r#"check="backlog""#), "{text}");
        assert!(text.contains(r#"check="latency""#));
        assert!(!text.contains("concurrency_experiment_stage_index{"));
    }

    #[test]
    fn remove_and_retain_drop_every_series_of_an_experiment() {
        let m = Metrics::new();
        m.set_experiment("shop", "storefront", &progressing());
        m.set_experiment("shop", "checkout", &progressing());
        m.set_experiment("billing", "storefront", &progressing());
        m.remove_experiment("shop", "storefront");
        let text = m.encode();
        assert!(!text.contains(EXP), "{text}");
        assert!(text.contains(r#"namespace="shop",experiment="checkout""#));

        m.retain_experiments(|ns, name| ns == "billing" && name == "storefront");
        let text = m.encode();
        assert!(!text.contains(r#"experiment="checkout""#), "{text}");
        assert!(text.contains(r#"namespace="billing",experiment="storefront""#));
        assert_eq!(
            value(
                &text,
                r#"concurrency_experiment_stage_index{namespace="billing",experiment="storefront"}"#
            ),
            Some(1.0)
        );
    }

    #[test]
    fn finished_experiments_keep_series_only_for_the_retention() {
        let now: jiff::Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        assert!(keeps_series(&progressing(), now));
        let decided = |at: &str| {
            status(json!({"phase": "RolledBack", "decision": {
                "action": "Rollback", "reason": "CheckFailed", "message": "m", "at": at}}))
        };
        assert!(keeps_series(&decided("2026-11-30T07:00:00Z"), now));
        assert!(!keeps_series(&decided("2026-11-30T05:59:00Z"), now));
        let invalid = status(json!({"phase": "Invalid", "conditions": [{
            "type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "m",
            "lastTransitionTime": "2026-11-29T01:00:00Z"}]}));
        assert!(!keeps_series(&invalid, now));
        // A finished status without any time is kept rather than guessed about.
        assert!(keeps_series(&status(json!({"phase": "Succeeded"})), now));
    }
}
