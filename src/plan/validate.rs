//! What the CRD schema cannot check: that the human-written quantities parse, and the problems
//! the shell found (`Observations::spec_error`). A failure names the field.

use std::time::Duration;

use crate::api::{
    max_predicted_utilization, parse_duration, parse_percent, ConcurrencyExperimentSpec,
};

/// The spec's durations and limits, parsed once per step.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// `spec.stages[i].duration`, by stage index.
    pub stages: Vec<Duration>,
    /// `spec.analysis.interval`.
    pub interval: Duration,
    /// `spec.progressDeadline`.
    pub progress_deadline: Duration,
    /// `spec.analysis.maxPredictedUtilization` as a share; `None` when the gate is `off`.
    pub max_utilization: Option<f64>,
    /// `spec.selection.duration` (default filled in) when the experiment selects.
    pub selection: Option<Duration>,
}

impl Timing {
    /// The duration of stage `index`, or of the last stage when the spec shrank mid-flight.
    pub fn stage(&self, index: usize) -> Duration {
        self.stages
            .get(index)
            .or(self.stages.last())
            .copied()
            .unwrap_or_default()
    }
}

/// Parses the spec's durations and checks its limits; `Err` is one sentence naming the field.
pub fn validate(
    spec: &ConcurrencyExperimentSpec,
    spec_error: Option<&str>,
) -> Result<Timing, String> {
    if let Some(e) = spec_error {
        return Err(e.to_string());
    }
    if spec.stages.is_empty() {
        return Err("spec.stages: at least one stage is required".into());
    }
    let err = |e: crate::api::QuantityError| e.to_string();
    let stages = spec
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| parse_duration(&format!("spec.stages[{i}].duration"), &s.duration))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let interval =
        parse_duration("spec.analysis.interval", &spec.analysis.interval).map_err(err)?;
    if interval.is_zero() {
        return Err("spec.analysis.interval: must be longer than 0s".into());
    }
    let progress_deadline =
        parse_duration("spec.progressDeadline", &spec.progress_deadline).map_err(err)?;
    if progress_deadline.is_zero() {
        return Err("spec.progressDeadline: must be longer than 0s".into());
    }
    if let Some(d) = &spec.traffic.scale_down_delay {
        parse_duration("spec.traffic.scaleDownDelay", d).map_err(err)?;
    }
    if let Some(d) = &spec.traffic.drain_delay {
        let max = crate::api::MAX_DRAIN_DELAY;
        if parse_duration("spec.traffic.drainDelay", d).map_err(err)? > max {
            return Err(format!(
                "spec.traffic.drainDelay: {d} is longer than {}s, the most every pod removal \
                 may wait",
                max.as_secs()
            ));
        }
    }
    for (i, c) in spec.analysis.checks.iter().enumerate() {
        let field = |f: &str| format!("spec.analysis.checks[{i}].{f}");
        if let Some(min) = &c.min {
            min.value(&field("min")).map_err(err)?;
        }
        if let Some(max) = &c.max {
            max.value(&field("max")).map_err(err)?;
        }
        if let Some(inc) = &c.max_increase {
            parse_percent(&field("maxIncrease"), inc).map_err(err)?;
        }
        if let Some(imp) = &c.min_improvement {
            let share = parse_percent(&field("minImprovement"), imp).map_err(err)?;
            if !(share > 0.0 && share < 1.0) {
                return Err(format!(
                    "{}: must be above 0% and below 100% (the candidate that much below the \
                     baseline), got {imp}",
                    field("minImprovement")
                ));
            }
            if spec.selects() {
                return Err(format!(
                    "{}: a selection ranks its candidates by spec.selection.objective; \
                     minImprovement is for stages (one candidate)",
                    field("minImprovement")
                ));
            }
        }
    }
    let rec = &spec.analysis.recommendation;
    parse_percent("spec.analysis.recommendation.minGain", &rec.min_gain).map_err(err)?;
    parse_percent("spec.analysis.recommendation.asyncAbove", &rec.async_above).map_err(err)?;
    let max_utilization = max_predicted_utilization(&spec.analysis).map_err(err)?;
    validate_judge(spec, stages.len()).map_err(|e| e.to_string())?;
    let selection = match spec.selects() {
        true => {
            let sel = spec.selection_or_default();
            if let Some(tol) = &sel.tolerance {
                parse_percent("spec.selection.tolerance", tol).map_err(err)?;
            }
            Some(parse_duration("spec.selection.duration", &sel.duration).map_err(err)?)
        }
        false => None,
    };
    Ok(Timing {
        stages,
        interval,
        progress_deadline,
        max_utilization,
        selection,
    })
}

/// `judge: sequential`: its rate, and what it cannot be combined with.
fn validate_judge(spec: &ConcurrencyExperimentSpec, stages: usize) -> Result<(), String> {
    let a = &spec.analysis;
    // The rate is checked there (0 % < rate < 100 %): the level it yields is always positive.
    if crate::analysis::test_alpha(a, stages)
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Ok(());
    }
    if a.statistical.is_some() {
        return Err(
            "spec.analysis.statistical: the Mann-Whitney test re-run at every interval is \
                    what judge: sequential replaces; set one of them"
                .into(),
        );
    }
    if spec.selects() {
        return Err(
            "spec.analysis.judge: sequential does not rank a selection's candidates \
                    (spec.selection); use judge: perInterval there"
                .into(),
        );
    }
    Ok(())
}
