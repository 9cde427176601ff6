//! `history NAME`: every analysis still kept in status, one row each, and the decision.

use std::io::Write;

use kube::ResourceExt;

use super::render::{count, decision_line, mark, stage_of, time, units, value, Table};
use super::{PluginError, Session};
use crate::api::{ConcurrencyExperiment, Verdict};
use crate::plan::KEPT_ANALYSES;

/// Column order: the spec's checks, then any check only old records carry (the spec changed).
fn check_names(exp: &ConcurrencyExperiment) -> Vec<String> {
    let mut names: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    let records = exp.status.iter().flat_map(|s| &s.analyses);
    for c in records.flat_map(|a| &a.checks) {
        if !names.contains(&c.name) {
            names.push(c.name.clone());
        }
    }
    names
}

pub fn history_text(exp: &ConcurrencyExperiment) -> String {
    let st = exp.status.clone().unwrap_or_default();
    let n = st.analyses.len();
    let mut out = format!(
        "{}: {n} {} kept in status (the operator keeps the newest {KEPT_ANALYSES}); in the whole \
         experiment {} failed (failureLimit {}), {} inconclusive (inconclusiveLimit {})\n",
        exp.name_any(),
        if n == 1 { "analysis" } else { "analyses" },
        st.failed_analyses,
        exp.spec.analysis.failure_limit,
        st.inconclusive_analyses,
        exp.spec.analysis.inconclusive_limit,
    );
    let names = check_names(exp);
    let limits: Vec<String> = exp
        .spec
        .analysis
        .checks
        .iter()
        .filter_map(|c| {
            crate::analysis::Limits::from_check(c)
                .ok()
                .map(|l| format!("{} {}", c.display_name(), l.written))
        })
        .collect();
    if !limits.is_empty() {
        out.push_str(&format!("Limits: {}\n", limits.join("; ")));
    }
    out.push('\n');
    if st.analyses.is_empty() {
        out.push_str("No analyses yet.\n");
    } else {
        let units = units(exp);
        let mut header = vec![
            "TIME".to_string(),
            "STAGE".into(),
            "WEIGHT".into(),
            "REQUESTS (BASE / CAND)".into(),
        ];
        header.extend(names.iter().map(|n| format!("{n} (base / cand)")));
        header.push("VERDICT".into());
        let mut t = Table::new(header);
        for a in &st.analyses {
            let mut row = vec![
                time(&a.at),
                stage_of(exp, a.stage_index),
                format!("{}%", a.weight),
                format!(
                    "{} / {}",
                    count(a.baseline_requests),
                    count(a.candidate_requests)
                ),
            ];
            for name in &names {
                row.push(match a.checks.iter().find(|c| &c.name == name) {
                    Some(c) => format!(
                        "{} / {} {}",
                        value(&units, name, c.baseline),
                        value(&units, name, c.candidate),
                        mark(c.verdict)
                    ),
                    None => "-".into(),
                });
            }
            row.push(a.verdict.as_str().into());
            t.row(row);
        }
        out.push_str(&t.render());
        let open: Vec<_> = st
            .analyses
            .iter()
            .filter(|a| a.verdict != Verdict::Pass)
            .collect();
        if !open.is_empty() {
            out.push_str("\nWhy not Pass:\n");
            for a in open {
                out.push_str(&format!(
                    "  {} {}: {}\n",
                    time(&a.at),
                    a.verdict.as_str(),
                    a.reason.as_deref().unwrap_or("no reason recorded")
                ));
                for c in a.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
                    if let Some(r) = &c.reason {
                        out.push_str(&format!("    {}: {r}\n", c.name));
                    }
                }
            }
        }
    }
    out.push('\n');
    match &st.decision {
        Some(d) => out.push_str(&format!("Decision: {}\n", decision_line(d))),
        None => out.push_str(&format!(
            "Decision: none yet (phase {})\n",
            st.phase.as_str()
        )),
    }
    out
}

pub async fn run(
    session: &Session,
    name: &str,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let exp = session.experiment(name).await?;
    out.write_all(history_text(&exp).as_bytes())?;
    Ok(())
}
