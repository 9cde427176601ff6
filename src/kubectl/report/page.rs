//! The report as one self-contained HTML page: a pure function of the experiment, what
//! Prometheus still had for its time range, and when it was made.
//!
//! Every chart is inline SVG (`svg`), so the file opens with no network and no script; the
//! analyses table carries each value unformatted in `data-` attributes, so a test can compare
//! it with the experiment's status exactly.

use std::fmt::Write;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::analysis::Unit;
use crate::api::{AnalysisRecord, ConcurrencyExperiment, ConcurrencyExperimentStatus, Verdict};

use super::history::{
    counted, not_yet_counted, stage_starts, Counted, History, Points, Series, Variant,
};
use super::sections::{
    analyses_table, capacity_section, check_section, queries, selection_section, Frame,
};
use super::svg::{clock, esc, Limit, Line, Marker, StageMark};
use crate::kubectl::render::{self, units};

/// The page's only style: inline, so the file needs nothing else.
const STYLE: &str = include_str!("style.css");

/// The whole page.
pub fn render(exp: &ConcurrencyExperiment, history: &History, made_at: Timestamp) -> String {
    let st = render::status(exp);
    let name = exp.name_any();
    let ns = exp.namespace().unwrap_or_default();
    let mut notes: Vec<String> = Vec::new();
    let stages = stage_marks(exp, &st, history, &mut notes);
    let frame = Frame {
        from: history.from.as_second() as f64,
        to: history.to.as_second() as f64,
        step: history.step.as_secs_f64(),
        stages,
    };

    let mut body = String::new();
    let _ = write!(
        body,
        r#"<header><h1>ConcurrencyExperiment {}/{}</h1><p class="sub">Deployment {} · {} → {}</p>"#,
        esc(&ns),
        esc(&name),
        esc(&exp.spec.target_ref.name),
        esc(&variant_summary(
            st.baseline.as_ref().map(|b| b.summary.as_str()),
            "baseline"
        )),
        esc(&candidate_summary(exp, &st)),
    );
    let stage_list: Vec<String> = exp
        .spec
        .stages
        .iter()
        .map(|s| format!("{}% for {}", s.weight, s.duration))
        .collect();
    let _ = write!(
        body,
        r#"<dl class="facts"><dt>Phase</dt><dd id="phase">{}</dd><dt>Stages</dt><dd>{}</dd><dt>Judge</dt><dd>{}, every {}</dd><dt>From</dt><dd>{}</dd><dt>To</dt><dd>{}</dd><dt>Prometheus</dt><dd>{}</dd></dl></header>"#,
        st.phase.as_str(),
        esc(&stage_list.join(", ")),
        esc(judge_name(exp)),
        esc(&exp.spec.analysis.interval),
        esc(&history.from.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()),
        esc(&history.to.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()),
        esc(&history.prometheus)
    );
    body.push_str(&decision(exp, &st));

    let mut sections = String::new();
    sections.push_str(&weight_section(exp, &st, history, &frame, &mut notes));
    let units = units(exp);
    // In a selection the winner walks the stages in a Deployment created for it: before stage
    // 1 the pods its name matches are an earlier experiment's, not this one's.
    let walk_start = st
        .selection
        .as_ref()
        .and_then(|_| {
            frame
                .stages
                .iter()
                .find(|m| m.label.starts_with("stage 1/"))
        })
        .map(|m| m.at);
    if walk_start.is_some() {
        notes.push("The candidate's line starts with stage 1, where the selection's winner began to walk the stages; each candidate's line is its own Deployment's.".into());
    }
    for check in &exp.spec.analysis.checks {
        let name = check.display_name();
        let mut series: Vec<Series> = history
            .checks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        if let Some(start) = walk_start {
            for s in series
                .iter_mut()
                .filter(|s| s.variant == Variant::Candidate)
            {
                if let Ok(points) = &mut s.points {
                    points.retain(|p| p.0 >= start);
                }
            }
        }
        sections.push_str(&check_section(
            check,
            &name,
            &series,
            &st.analyses,
            &units,
            &frame,
        ));
    }
    sections.push_str(&capacity_section(&st, history, &frame));
    sections.push_str(&selection_section(&st));
    sections.push_str(&analyses_table(exp, &st, &units));

    if st.analyses.len() >= crate::api::KEPT_ANALYSES {
        let older = if counted_by_operator(history) {
            "the Traffic chart marks every analysis, from the operator's counter"
        } else {
            "they are not drawn as markers"
        };
        notes.push(format!(
            "Status keeps the last {} analyses: older ones are not in the table or on the checks' charts, and {older}; the series show their whole range.",
            crate::api::KEPT_ANALYSES
        ));
    }
    if !notes.is_empty() {
        body.push_str(r#"<ul class="notes" id="notes">"#);
        for n in &notes {
            let _ = write!(body, "<li>{}</li>", esc(n));
        }
        body.push_str("</ul>");
    }
    body.push_str(&sections);
    body.push_str(&queries(history));
    let _ = write!(
        body,
        "<footer>Made by kubectl concurrency report at {}.</footer>",
        esc(&made_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
    );
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{} — concurrency report</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(&name)
    )
}

fn judge_name(exp: &ConcurrencyExperiment) -> &'static str {
    match crate::analysis::test_alpha(&exp.spec.analysis, exp.spec.stages.len()) {
        Ok(Some(_)) => "sequential (anytime-valid)",
        _ => "per interval",
    }
}

fn variant_summary(summary: Option<&str>, fallback: &str) -> String {
    summary.map_or_else(|| fallback.to_string(), str::to_string)
}

fn candidate_summary(exp: &ConcurrencyExperiment, st: &ConcurrencyExperimentStatus) -> String {
    if let Some(c) = &st.candidate {
        return c.summary.clone();
    }
    match &st.selection {
        Some(s) => {
            let all: Vec<&str> = s.variants.iter().map(|v| v.summary.as_str()).collect();
            format!("best of {}", all.join(", "))
        }
        None if exp.spec.candidates.is_some() => "best of the candidates".into(),
        None => "candidate".into(),
    }
}

/// The decision and why, or what is happening now.
fn decision(exp: &ConcurrencyExperiment, st: &ConcurrencyExperimentStatus) -> String {
    match &st.decision {
        Some(d) => format!(
            r#"<section id="decision" class="{:?}" data-action="{:?}" data-reason="{}"><strong>{}</strong> ({}) at {} — {}</section>"#,
            d.action,
            d.action,
            esc(&d.reason),
            match d.action {
                crate::api::DecisionAction::Promote => "Promoted",
                crate::api::DecisionAction::Rollback => "Rolled back",
            },
            esc(&d.reason),
            esc(&clock(d.at.0.as_second() as f64)),
            esc(&d.message)
        ),
        None => format!(
            r#"<section id="decision" data-action="none"><strong>No decision yet</strong>: {}{} — {}</section>"#,
            st.phase.as_str(),
            st.stage_index
                .map(|i| format!(", stage {}", render::stage_of(exp, i)))
                .unwrap_or_default(),
            esc(st.message.as_deref().unwrap_or(""))
        ),
    }
}

/// Stage boundaries: from the operator's stage gauge where this Prometheus scrapes it, else
/// from status (the current stage exactly, earlier ones by their first analysis kept).
fn stage_marks(
    exp: &ConcurrencyExperiment,
    st: &ConcurrencyExperimentStatus,
    history: &History,
    notes: &mut Vec<String>,
) -> Vec<StageMark> {
    let label = |i: i32| {
        let weight = usize::try_from(i)
            .ok()
            .and_then(|i| exp.spec.stages.get(i))
            .map(|s| format!(" · {}%", s.weight))
            .unwrap_or_default();
        format!("stage {}{weight}", render::stage_of(exp, i))
    };
    let mut marks = Vec::new();
    if let Some(at) = st.selection.as_ref().and_then(|s| s.started_at.as_ref()) {
        marks.push(StageMark {
            at: at.0.as_second() as f64,
            label: "selection".into(),
        });
    }
    match &history.stage {
        Ok(points) if !points.is_empty() => {
            for (at, i) in stage_starts(points) {
                marks.push(StageMark { at, label: label(i) });
            }
            return marks;
        }
        Ok(_) => notes.push(
            "This Prometheus has no samples of the operator's gauges (concurrency_experiment_*) for this experiment: stage boundaries come from status (the current stage's start, earlier stages by their first analysis kept) and the weight from the analyses.".into(),
        ),
        Err(e) => notes.push(format!(
            "The operator's gauges could not be read ({e}): stage boundaries and weights come from status."
        )),
    }
    let current = st.stage_index;
    let mut seen = std::collections::BTreeSet::new();
    for a in &st.analyses {
        if Some(a.stage_index) == current || !seen.insert(a.stage_index) {
            continue;
        }
        marks.push(StageMark {
            at: a.at.0.as_second() as f64,
            label: format!("{} (by)", label(a.stage_index)),
        });
    }
    if let (Some(i), Some(at)) = (current, st.stage_started_at.as_ref()) {
        marks.push(StageMark {
            at: at.0.as_second() as f64,
            label: label(i),
        });
    }
    marks
}

fn weight_section(
    exp: &ConcurrencyExperiment,
    st: &ConcurrencyExperimentStatus,
    history: &History,
    frame: &Frame,
    notes: &mut Vec<String>,
) -> String {
    let mut chart = frame.chart("weight", Some(Unit::Plain));
    chart.stepped = true;
    let (points, source) = match &history.weight {
        Ok(p) if !p.is_empty() => (p.clone(), "the operator's gauge"),
        _ => (
            st.analyses
                .iter()
                .map(|a| (a.at.0.as_second() as f64, f64::from(a.weight)))
                .collect::<Points>(),
            "the analyses in status",
        ),
    };
    if points.is_empty() {
        notes.push("No weight in force is known: no analysis ran.".into());
    }
    chart.markers = verdict_marks(st, history, &points, notes);
    chart.lines.push(Line {
        label: format!("candidate's share of traffic in force, % (from {source})"),
        class: "weight".into(),
        points,
        dashed: false,
    });
    chart.limits.push(Limit {
        label: "100%".into(),
        value: 100.0,
        class: "capacity",
    });
    let planned: Vec<String> = exp
        .spec
        .stages
        .iter()
        .map(|s| format!("{}%", s.weight))
        .collect();
    format!(
        r#"<section id="weights"><h2>Traffic</h2><p class="sub">Stages {} planned; the line is the split in force (pods ready, routes applied); a dot is where analyses ended, coloured by verdict.</p><figure data-chart="weight">{}</figure></section>"#,
        esc(&planned.join(" → ")),
        chart.render()
    )
}

/// Whether this Prometheus has the operator's count of the experiment's analyses.
fn counted_by_operator(history: &History) -> bool {
    history
        .verdicts
        .iter()
        .any(|(_, p)| p.as_ref().is_ok_and(|p| !p.is_empty()))
}

/// One analysis status keeps, marked where and at the weight it ran.
fn status_mark(a: &AnalysisRecord, note: &str) -> Marker {
    let at = a.at.0.as_second() as f64;
    Marker {
        at,
        value: f64::from(a.weight),
        verdict: a.verdict.as_str(),
        count: 1,
        title: format!("{} · analysis {}{note}", clock(at), a.verdict.as_str()),
    }
}

/// Each analysis' verdict on the weight line: every one the operator counted (so analyses
/// status no longer keeps are there too), else the ones status keeps.
fn verdict_marks(
    st: &ConcurrencyExperimentStatus,
    history: &History,
    weight: &[(f64, f64)],
    notes: &mut Vec<String>,
) -> Vec<Marker> {
    let weight_at = |t: f64| {
        weight
            .iter()
            .take_while(|p| p.0 <= t)
            .last()
            .or(weight.first())
            .map_or(0.0, |p| p.1)
    };
    if !counted_by_operator(history) {
        if let Some(e) = history.verdicts.iter().find_map(|(_, p)| p.as_ref().err()) {
            notes.push(format!(
                "The operator's count of analyses could not be read ({e}): the verdicts marked are those status keeps."
            ));
        }
        return st.analyses.iter().map(|a| status_mark(a, "")).collect();
    }
    let counts: Vec<(Verdict, Vec<Counted>)> = history
        .verdicts
        .iter()
        .filter_map(|(v, p)| {
            Some((
                *v,
                counted(p.as_ref().ok()?, history.from.as_second() as f64),
            ))
        })
        .collect();
    let mut marks: Vec<Marker> = not_yet_counted(&st.analyses, &counts)
        .into_iter()
        .map(|a| status_mark(a, " (after the operator's count was last scraped)"))
        .collect();
    for (verdict, cs) in counts {
        for c in cs {
            let what = match c.count {
                1 => "1 analysis".to_string(),
                n => format!("{n} analyses"),
            };
            marks.push(Marker {
                at: c.at,
                value: weight_at(c.at),
                verdict: verdict.as_str(),
                count: c.count,
                title: format!(
                    "{what} {} between {} and {}",
                    verdict.as_str(),
                    clock(c.since),
                    clock(c.at)
                ),
            });
        }
    }
    marks.sort_by(|a, b| a.at.total_cmp(&b.at));
    marks
}
