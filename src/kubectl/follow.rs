//! What `get NAME -w` prints after the first view: only what changed, one line each, so a
//! follower in a terminal, a log or CI reads the experiment as a story (phase and weight
//! changes, every analysis as a row, eliminations, the choice, the decision), not the whole
//! view again on every status write.

use std::collections::BTreeSet;

use crate::api::{
    AnalysisRecord, CheckResult, ConcurrencyExperiment, ConcurrencyExperimentStatus, Verdict,
};

use super::render::{count, decision_line, mark, stage_of, status, time, units, value};
use super::selection::selection_block;

/// Phase, stage, weights and message: a change in any of them is a state line.
fn state(st: &ConcurrencyExperimentStatus) -> String {
    format!(
        "{}  stage {}, weight {}% planned / {}% in force{}",
        st.phase.as_str(),
        st.stage.as_deref().unwrap_or("-"),
        st.planned_weight,
        st.effective_weight,
        st.message
            .as_deref()
            .map(|m| format!("  ({m})"))
            .unwrap_or_default()
    )
}

/// `latency 80 ms / 82 ms ✓ · memory …`: each check baseline / candidate with its mark.
fn checks_text(exp: &ConcurrencyExperiment, checks: &[CheckResult]) -> String {
    if checks.is_empty() {
        return "no checks evaluated".into();
    }
    let units = units(exp);
    let cells: Vec<String> = checks
        .iter()
        .map(|c| {
            format!(
                "{} {} / {} {}",
                c.name,
                value(&units, &c.name, c.baseline),
                value(&units, &c.name, c.candidate),
                mark(c.verdict)
            )
        })
        .collect();
    cells.join(" · ")
}

/// One analysis on one line: stage, weight, requests, each check baseline / candidate with its
/// mark, the verdict; the reasons of what did not pass on the lines below.
pub fn analysis_line(exp: &ConcurrencyExperiment, a: &AnalysisRecord) -> String {
    let checks = checks_text(exp, &a.checks);
    let mut out = format!(
        "  {}  stage {}  {}%  requests {} / {}  {}  → {} {}\n",
        time(&a.at),
        stage_of(exp, a.stage_index),
        a.weight,
        count(a.baseline_requests),
        count(a.candidate_requests),
        checks,
        mark(a.verdict),
        a.verdict.as_str()
    );
    if a.verdict != Verdict::Pass {
        if let Some(r) = &a.reason {
            out.push_str(&format!("      {r}\n"));
        }
        for c in a.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
            if let Some(r) = &c.reason {
                out.push_str(&format!("      {}: {r}\n", c.name));
            }
        }
    }
    out
}

/// The records of `st` a follower has not seen in `before` (status keeps the newest ten, so
/// they are told apart by time and stage, not by position).
fn new_analyses<'a>(
    before: &ConcurrencyExperimentStatus,
    st: &'a ConcurrencyExperimentStatus,
) -> impl Iterator<Item = &'a AnalysisRecord> {
    let seen: BTreeSet<(String, i32)> = before
        .analyses
        .iter()
        .map(|a| (time(&a.at), a.stage_index))
        .collect();
    st.analyses
        .iter()
        .filter(move |a| !seen.contains(&(time(&a.at), a.stage_index)))
}

/// What changed from `before` to `after`, as the lines to print (empty: nothing worth a line).
/// `clock` is the time printed on state lines (`HH:MM:SS`).
pub fn changes(
    before: &ConcurrencyExperiment,
    after: &ConcurrencyExperiment,
    clock: &str,
) -> String {
    let (b, a) = (status(before), status(after));
    let mut out = String::new();
    if state(&b) != state(&a) {
        out.push_str(&format!("» {clock}  {}\n", state(&a)));
    }
    for record in new_analyses(&b, &a) {
        out.push_str(&analysis_line(after, record));
    }
    let (bs, sel) = (
        b.selection.unwrap_or_default(),
        a.selection.unwrap_or_default(),
    );
    for v in &sel.variants {
        let old = bs.variants.iter().find(|o| o.index == v.index);
        let analyses = v.passed_analyses + v.failed_analyses;
        let old_analyses = old.map_or(0, |o| o.passed_analyses + o.failed_analyses);
        if analyses != old_analyses && !v.checks.is_empty() {
            out.push_str(&format!(
                "  {}: analysis {analyses} against the fresh baseline ({} ✓ {} ✗)  {}\n",
                v.summary,
                v.passed_analyses,
                v.failed_analyses,
                checks_text(after, &v.checks)
            ));
        }
        if let (Some(e), None) = (&v.eliminated, old.and_then(|o| o.eliminated.as_ref())) {
            out.push_str(&format!("  ✗ {}\n", e.message));
        }
    }
    if sel.winner.is_some() && bs.winner.is_none() {
        if let Some(block) = selection_block(after) {
            out.push('\n');
            out.push_str(&block);
        }
    }
    if let Some(d) = a
        .decision
        .as_ref()
        .filter(|d| b.decision.as_ref() != Some(*d))
    {
        out.push_str(&format!("Decision: {}\n", decision_line(d)));
    }
    out
}
