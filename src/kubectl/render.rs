//! Pure rendering of experiments for people: the detail view, the namespace list and check
//! values in their units (the tables themselves: `table`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::analysis::Unit;
use crate::api::{
    AnalysisRecord, CapacityMeasurement, CheckResult, ConcurrencyExperiment,
    ConcurrencyExperimentStatus, Decision, Phase, VariantStatus, Verdict,
};
use crate::plan::controls::{answer, Answer, Control};
use crate::plan::{
    AWAITING_APPROVAL, AWAITING_EXTERNAL_PROMOTION, INCONCLUSIVE_LIMIT, INSUFFICIENT_CAPACITY,
};

use super::selection::selection_block;
pub use super::table::{age, line, mark, time, Table};

/// How each check's values read: the unit of the spec's check of that name.
pub fn units(exp: &ConcurrencyExperiment) -> BTreeMap<String, Unit> {
    exp.spec
        .analysis
        .checks
        .iter()
        .map(|c| (c.display_name(), Unit::of(c)))
        .collect()
}

pub fn value(units: &BTreeMap<String, Unit>, check: &str, v: Option<f64>) -> String {
    match v {
        Some(v) => units.get(check).copied().unwrap_or(Unit::Plain).format(v),
        None => "-".into(),
    }
}

/// `1200`, `-` when not measured.
pub fn count(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.0}"),
        _ => "-".into(),
    }
}

pub fn status(exp: &ConcurrencyExperiment) -> ConcurrencyExperimentStatus {
    exp.status.clone().unwrap_or_default()
}

/// `2/3` of the spec's stages for a record's stage index.
pub fn stage_of(exp: &ConcurrencyExperiment, index: i32) -> String {
    format!("{}/{}", index + 1, exp.spec.stages.len())
}

pub fn decision_line(d: &Decision) -> String {
    format!(
        "{:?} ({}) at {} — {}",
        d.action,
        d.reason,
        time(&d.at),
        d.message
    )
}

fn variant_line(v: &VariantStatus) -> String {
    format!(
        "{} — Deployment {}, {}/{} ready",
        v.summary, v.deployment, v.ready_replicas, v.replicas
    )
}

/// Why the experiment is paused or held, and the command that continues it.
pub fn hold_lines(exp: &ConcurrencyExperiment, st: &ConcurrencyExperimentStatus) -> Vec<String> {
    let name = exp.name_any();
    // The commands offered are the ones the operator will act on now (`plan::controls`).
    let does = |control: Control| match answer(control, exp) {
        Answer::Does(what) => Some(what),
        Answer::Asked(_) | Answer::Refused(_) => None,
    };
    let mut lines = Vec::new();
    if let Some(what) = does(Control::Retry) {
        lines.push(format!(
            "Retry:       `kubectl concurrency retry {name}` {what}"
        ));
    }
    if st.phase.is_terminal() {
        return lines;
    }
    let abort = does(Control::Abort).map_or_else(String::new, |_| ", `abort` rolls back".into());
    let approve = does(Control::Approve)
        .map(|what| format!("; `kubectl concurrency approve {name}` {what}{abort}"))
        .unwrap_or_default();
    match st.hold_reason.as_deref() {
        Some(AWAITING_APPROVAL) => lines.push(format!(
            "Hold:        {AWAITING_APPROVAL} — all stages passed{approve}"
        )),
        Some(AWAITING_EXTERNAL_PROMOTION) => lines.push(format!(
            "Hold:        {AWAITING_EXTERNAL_PROMOTION} — all stages passed; commit the patch below to Deployment {} in Git: the experiment completes once the target runs it",
            exp.spec.target_ref.name
        )),
        Some(INCONCLUSIVE_LIMIT) => lines.push(format!(
            "Hold:        {INCONCLUSIVE_LIMIT} — too many analyses without data{approve}"
        )),
        Some(INSUFFICIENT_CAPACITY) => {
            let gate = st
                .capacity_gate
                .as_ref()
                .map_or_else(String::new, |g| format!(" — {}", g.message.trim_end_matches('.')));
            lines.push(format!("Hold:        {INSUFFICIENT_CAPACITY}{gate}{approve}"))
        }
        Some(other) => lines.push(format!("Hold:        {other}{approve}")),
        None => {}
    }
    if let Some(what) = does(Control::Resume) {
        lines.push(format!(
            "Paused:      spec.paused — `kubectl concurrency resume {name}` {what}"
        ));
    }
    lines
}

/// The latest analysis as a table of its checks, with the reasons of those that did not pass.
pub fn analysis_block(exp: &ConcurrencyExperiment, a: &AnalysisRecord, now: Timestamp) -> String {
    let units = units(exp);
    let mut out = format!(
        "Latest analysis: {} ({} ago), stage {}, weight {}%, requests baseline {} / candidate {}\n",
        time(&a.at),
        age(now, a.at.0),
        stage_of(exp, a.stage_index),
        a.weight,
        count(a.baseline_requests),
        count(a.candidate_requests),
    );
    if a.checks.is_empty() {
        out.push_str("  no checks were evaluated\n");
    } else {
        let mut t =
            Table::new(["CHECK", "BASELINE", "CANDIDATE", "LIMIT", "VERDICT"]).indented("  ");
        for c in &a.checks {
            t.row([
                c.name.clone(),
                value(&units, &c.name, c.baseline),
                value(&units, &c.name, c.candidate),
                c.limit.clone(),
                format!("{} {}", mark(c.verdict), c.verdict.as_str()),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push_str(&format!(
        "  Verdict: {} {}{}\n",
        mark(a.verdict),
        a.verdict.as_str(),
        a.reason
            .as_deref()
            .map(|r| format!(" — {r}"))
            .unwrap_or_default()
    ));
    for c in a.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        out.push_str(&check_reason(c));
    }
    if let Some(m) = &a.capacity {
        out.push_str(&capacity_lines(m));
    }
    out
}

/// The capacity measurement of an analysis: each variant's times per request, where they come
/// from, its estimated capacity and headroom.
pub fn capacity_lines(m: &CapacityMeasurement) -> String {
    let secs = Unit::Seconds;
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let mut out = String::new();
    for (name, v) in [("baseline", &m.baseline), ("candidate", &m.candidate)] {
        let Some(v) = v else { continue };
        out.push_str(&format!(
            "  Capacity {name}: {} CPU + {} I/O per request ({}), {} per pod, headroom {}\n",
            opt(v.cpu_per_request, &|x| secs.format(x)),
            opt(v.io_per_request, &|x| secs.format(x)),
            v.source.map_or("no source", |s| s.describe()),
            opt(v.capacity_per_pod, &|x| format!("{x:.1} req/s")),
            opt(v.headroom, &|x| format!("{:.0}%", x * 100.0)),
        ));
    }
    out
}

fn check_reason(c: &CheckResult) -> String {
    match &c.reason {
        Some(r) => format!("  {}: {r}\n", c.name),
        None => String::new(),
    }
}

/// Everything `get NAME` shows.
pub fn experiment_detail(exp: &ConcurrencyExperiment, now: Timestamp) -> String {
    let st = status(exp);
    let spec = &exp.spec;
    let mut lines = vec![
        format!("Name:        {}", exp.name_any()),
        format!("Namespace:   {}", exp.namespace().unwrap_or_default()),
        format!(
            "Target:      Deployment {}, container {}",
            spec.target_ref.name,
            spec.container.as_deref().unwrap_or("(first)")
        ),
    ];
    let phase = if exp.status.is_none() {
        "Pending (not yet seen by the operator)".to_string()
    } else {
        st.phase.as_str().to_string()
    };
    lines.push(format!("Phase:       {phase}"));
    lines.push(format!(
        "Stage:       {}, weight {}% planned / {}% in force",
        st.stage.as_deref().unwrap_or("-"),
        st.planned_weight,
        st.effective_weight
    ));
    if let Some(m) = &st.message {
        lines.push(format!("Message:     {m}"));
    }
    match &st.baseline {
        Some(b) => lines.push(format!("Baseline:    {}", variant_line(b))),
        None => lines.push(format!(
            "Baseline:    Deployment {} (not read yet)",
            spec.target_ref.name
        )),
    }
    match &st.candidate {
        Some(c) => lines.push(format!("Candidate:   {}", variant_line(c))),
        None => lines.push(format!(
            "Candidate:   {} (not deployed)",
            candidate_cell(exp)
        )),
    }
    lines.push(format!(
        "Analyses:    {} failed (failureLimit {}), {} inconclusive (inconclusiveLimit {})",
        st.failed_analyses,
        spec.analysis.failure_limit,
        st.inconclusive_analyses,
        spec.analysis.inconclusive_limit
    ));
    lines.extend(hold_lines(exp, &st));
    if let Some(p) = &st.promotion_patch {
        lines.push(format!(
            "Promotion:   {} (strategic merge patch)",
            p.summary
        ));
        lines.extend(p.strategic_merge_patch.lines().map(|l| format!("  {l}")));
    }
    let mut out: String = lines.iter().map(|l| format!("{l}\n")).collect();
    if let Some(block) = selection_block(exp) {
        out.push('\n');
        out.push_str(&block);
    }
    out.push('\n');
    match st.analyses.last() {
        Some(a) => out.push_str(&analysis_block(exp, a, now)),
        None => out.push_str("Latest analysis: none yet\n"),
    }
    out.push('\n');
    match &st.decision {
        Some(d) => out.push_str(&format!("Decision:       {}\n", decision_line(d))),
        None => out.push_str("Decision:       none yet\n"),
    }
    match &st.recommendation {
        Some(r) => out.push_str(&format!("Recommendation: {}\n", r.message)),
        None => out.push_str(
            "Recommendation: none yet (needs the GVL counters, or the request-duration \
             histogram and the container's CPU)\n",
        ),
    }
    out
}

pub const LIST_HEADER: [&str; 11] = [
    "NAME",
    "TARGET",
    "PHASE",
    "STAGE",
    "PLANNED",
    "IN FORCE",
    "VERDICT",
    "BASELINE",
    "CANDIDATE",
    "DECISION",
    "AGE",
];

/// One experiment's line of `get` without a name.
pub fn list_row(exp: &ConcurrencyExperiment, now: Timestamp) -> Vec<String> {
    let st = status(exp);
    let phase = match (&exp.status, st.hold_reason.as_deref()) {
        (None, _) => "Pending".to_string(),
        (Some(_), Some(hold)) if st.phase == Phase::Paused => format!("Paused ({hold})"),
        _ => st.phase.as_str().to_string(),
    };
    vec![
        exp.name_any(),
        exp.spec.target_ref.name.clone(),
        phase,
        st.stage.clone().unwrap_or_else(|| "-".into()),
        format!("{}%", st.planned_weight),
        format!("{}%", st.effective_weight),
        st.last_verdict
            .map_or("-".into(), |v| v.as_str().to_string()),
        st.baseline
            .as_ref()
            .map_or("-".into(), |b| b.summary.clone()),
        st.candidate
            .as_ref()
            .map_or_else(|| candidate_cell(exp), |c| c.summary.clone()),
        st.decision
            .as_ref()
            .map_or("-".into(), |d| format!("{:?} ({})", d.action, d.reason)),
        exp.metadata
            .creation_timestamp
            .as_ref()
            .map_or("-".into(), |t| age(now, t.0)),
    ]
}

/// The candidate, or, while a selection has not chosen, how many it chooses from.
fn candidate_cell(exp: &ConcurrencyExperiment) -> String {
    let winner = exp
        .status
        .as_ref()
        .and_then(|s| s.selection.as_ref())
        .and_then(|s| s.winner);
    if exp.spec.selects() && winner.is_none() {
        return format!("{} candidates", exp.spec.candidate_list().len());
    }
    exp.spec.walked_candidate(exp.status.as_ref()).summary()
}

pub fn experiment_list(exps: &[ConcurrencyExperiment], now: Timestamp) -> String {
    let mut t = Table::new(LIST_HEADER);
    for e in exps {
        t.row(list_row(e, now));
    }
    t.render()
}
