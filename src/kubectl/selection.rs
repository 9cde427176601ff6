//! A selection (`spec.candidates`) for people: every candidate against the fresh baseline,
//! the eliminations, the ranking and the choice explained.

use crate::analysis::Unit;
use crate::api::{ConcurrencyExperiment, ObjectiveMetric, SelectionStatus, Verdict};

use super::table::{mark, time, Table};

/// How an objective's values read.
fn objective_unit(m: ObjectiveMetric) -> Unit {
    match m {
        ObjectiveMetric::Memory => Unit::Bytes,
        ObjectiveMetric::Latency | ObjectiveMetric::QueueTime | ObjectiveMetric::Cpu => {
            Unit::Seconds
        }
        ObjectiveMetric::Custom => Unit::Plain,
    }
}

fn objective_name(m: ObjectiveMetric) -> &'static str {
    match m {
        ObjectiveMetric::Memory => "MEMORY",
        ObjectiveMetric::Latency => "LATENCY",
        ObjectiveMetric::QueueTime => "QUEUE TIME",
        ObjectiveMetric::Cpu => "CPU/REQUEST",
        ObjectiveMetric::Custom => "OBJECTIVE",
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |h| format!("{:.0}%", h * 100.0))
}

/// The selection's lines of `get NAME`; `None` for an experiment with one candidate.
pub fn selection_block(exp: &ConcurrencyExperiment) -> Option<String> {
    if !exp.spec.selects() {
        return None;
    }
    let spec = exp.spec.selection_or_default();
    let minimize = spec.objective.minimize;
    let unit = objective_unit(minimize);
    let empty = SelectionStatus::default();
    let st = exp
        .status
        .as_ref()
        .and_then(|s| s.selection.as_ref())
        .unwrap_or(&empty);
    let fresh = exp
        .status
        .as_ref()
        .and_then(|s| s.fresh_baseline.as_ref())
        .and_then(|f| f.variant.as_ref())
        .map_or("the fresh baseline (not deployed)".to_string(), |v| {
            format!("Deployment {}", v.deployment)
        });
    let mut out = format!(
        "Selection:   {} candidates at {}% each against {fresh}, {} long; minimize {}{}\n",
        exp.spec.candidate_list().len(),
        spec.weight,
        spec.duration,
        objective_name(minimize).to_lowercase(),
        st.started_at
            .as_ref()
            .map(|t| format!(", started {}", time(t)))
            .unwrap_or_else(|| ", not started (waiting for every share in force)".into()),
    );
    let mut t = Table::new([
        "#",
        "CANDIDATE",
        objective_name(minimize),
        "COST",
        "HEADROOM",
        "ANALYSES",
        "VERDICT",
    ])
    .indented("  ");
    let analyses = |index: i32| {
        st.variants
            .iter()
            .find(|v| v.index == index)
            .map_or("-".into(), |v| {
                format!("{} ✓ {} ✗", v.passed_analyses, v.failed_analyses)
            })
    };
    if st.ranking.is_empty() {
        // Before the first ranking: the candidates as they stand, in spec order.
        for v in &st.variants {
            let verdict = match &v.eliminated {
                Some(e) => format!("✗ eliminated ({})", e.checks.join(", ")),
                None => "running".into(),
            };
            t.row([
                "-".to_string(),
                v.summary.clone(),
                mean(&v.objective_samples).map_or("-".into(), |x| unit.format(x)),
                "-".into(),
                percent(v.headroom),
                analyses(v.index),
                verdict,
            ]);
        }
    } else {
        for (n, r) in st.ranking.iter().enumerate() {
            let verdict = match (&r.verdict, &r.reason) {
                (Verdict::Pass, _) => format!("{} survivor", mark(Verdict::Pass)),
                (v, Some(reason)) => format!("{} {reason}", mark(*v)),
                (v, None) => format!("{} {}", mark(*v), v.as_str()),
            };
            t.row([
                (n + 1).to_string(),
                r.summary.clone(),
                r.objective.map_or("-".into(), |x| unit.format(x)),
                r.cost.map_or("-".into(), |c| c.to_string()),
                percent(r.headroom),
                analyses(r.index),
                verdict,
            ]);
        }
    }
    out.push_str(&t.render());
    for v in st.variants.iter().filter_map(|v| v.eliminated.as_ref()) {
        out.push_str(&format!("  Eliminated: {}\n", v.message));
    }
    match (&st.message, st.winner) {
        (Some(m), Some(_)) => out.push_str(&format!("  Choice:     {m}\n")),
        (Some(m), None) => out.push_str(&format!("  Standing:   {m}\n")),
        _ => {}
    }
    Some(out)
}
