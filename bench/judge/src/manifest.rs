//! What a replay reads of a manifest: its first `ConcurrencyExperiment` (from YAML, or from a
//! Markdown file's fenced YAML blocks), and the stages, interval, limits and checks the
//! traces can judge.

use anyhow::{bail, Context};
use concurrency_operator::analysis::Limits;
use concurrency_operator::api::{
    max_predicted_utilization, parse_duration, BuiltinMetric, Check, ConcurrencyExperimentSpec,
};
use serde::Deserialize;

/// What the replay needs of a manifest.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub interval_seconds: u64,
    /// Analyses in each stage (its duration over the interval, at least one).
    pub analyses: Vec<usize>,
    /// Each stage's weight (percent).
    pub weights: Vec<i32>,
    /// The checks the traces have data for, each with its limits (read once).
    pub checks: Vec<Judged>,
    /// Checks left out, with why.
    pub skipped: Vec<String>,
    pub failure_limit: i32,
    pub inconclusive_limit: i32,
    pub min_requests: i64,
    /// `maxPredictedUtilization` (`None`: `off`): the capacity gate before each weight step.
    pub max_utilization: Option<f64>,
}

impl Plan {
    pub fn from_spec(name: &str, spec: &ConcurrencyExperimentSpec) -> anyhow::Result<Plan> {
        let a = &spec.analysis;
        let interval = parse_duration("spec.analysis.interval", &a.interval)?.as_secs();
        if interval == 0 {
            bail!("{name}: interval 0");
        }
        let analyses = spec
            .stages
            .iter()
            .map(|s| {
                let d = parse_duration("spec.stages[].duration", &s.duration)?.as_secs();
                Ok((d / interval).max(1) as usize)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let (mut checks, mut skipped) = (Vec::new(), Vec::new());
        for c in &a.checks {
            match c.metric {
                Some(
                    BuiltinMetric::Latency
                    | BuiltinMetric::QueueTime
                    | BuiltinMetric::ErrorRate
                    | BuiltinMetric::Memory,
                ) => checks.push(Judged {
                    limits: Limits::from_check(c).with_context(|| name.to_string())?,
                    check: c.clone(),
                }),
                _ => skipped.push(format!("{} (not in the traces)", c.display_name())),
            }
        }
        Ok(Plan {
            name: name.into(),
            interval_seconds: interval,
            analyses,
            weights: spec.stages.iter().map(|s| s.weight).collect(),
            checks,
            skipped,
            failure_limit: a.failure_limit,
            inconclusive_limit: a.inconclusive_limit,
            min_requests: a.min_requests,
            max_utilization: max_predicted_utilization(a)?,
        })
    }

    pub fn total_analyses(&self) -> usize {
        self.analyses.iter().sum()
    }
}

/// A check and its limits in base units.
#[derive(Debug, Clone)]
pub struct Judged {
    pub check: Check,
    pub limits: Limits,
}

/// A manifest file's spec (the first `ConcurrencyExperiment` in it).
pub fn load_spec(path: &std::path::Path) -> anyhow::Result<ConcurrencyExperimentSpec> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    // Markdown (README): its fenced YAML blocks, in order.
    let yaml = if path.extension().is_some_and(|e| e == "md") {
        text.split("```yaml")
            .skip(1)
            .filter_map(|block| block.split("```").next())
            .collect::<Vec<_>>()
            .join("\n---\n")
    } else {
        text
    };
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let Ok(value) = serde_yaml::Value::deserialize(doc) else {
            continue;
        };
        if value.get("kind").and_then(|k| k.as_str()) == Some("ConcurrencyExperiment") {
            let spec = value.get("spec").context("no spec")?.clone();
            return Ok(serde_yaml::from_value(spec)?);
        }
    }
    bail!("{}: no ConcurrencyExperiment", path.display())
}
