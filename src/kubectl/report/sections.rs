//! The report's sections below the traffic chart: one per check, capacity, selection, and the
//! analyses table (pure, as the rest of the page).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analysis::{Limits, Unit};
use crate::api::{AnalysisRecord, ConcurrencyExperiment, ConcurrencyExperimentStatus};
use crate::kubectl::render::{self, value};

use super::history::{History, Series, Variant};
use super::svg::{clock, esc, segments, Chart, Limit, Line, Marker, StageMark};

/// What every chart of the page shares: the time axis and the stage boundaries.
pub(super) struct Frame {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    pub stages: Vec<StageMark>,
}

impl Frame {
    pub(super) fn chart(&self, id: &str, unit: Option<Unit>) -> Chart {
        Chart {
            id: id.to_string(),
            unit,
            from: self.from,
            to: self.to,
            step: self.step,
            stages: self.stages.clone(),
            ..Default::default()
        }
    }
}

pub(super) fn check_section(
    check: &crate::api::Check,
    name: &str,
    series: &[Series],
    analyses: &[AnalysisRecord],
    units: &BTreeMap<String, Unit>,
    frame: &Frame,
) -> String {
    let unit = units.get(name).copied();
    let mut chart = frame.chart(name, unit);
    let mut missing = Vec::new();
    for s in series {
        push_series(&mut chart, s, frame, &mut missing);
    }
    let limits = Limits::from_check(check).ok();
    if let Some(l) = &limits {
        let fmt = |v: f64| unit.unwrap_or(Unit::Plain).format(v);
        if let Some(max) = l.max {
            chart.limits.push(Limit {
                label: format!("max {}", fmt(max)),
                value: max,
                class: "max",
            });
        }
        if let Some(min) = l.min {
            chart.limits.push(Limit {
                label: format!("min {}", fmt(min)),
                value: min,
                class: "min",
            });
        }
        if let Some(inc) = l.max_increase {
            let baseline = series
                .iter()
                .find(|s| s.variant == Variant::Baseline)
                .and_then(|s| s.points.as_ref().ok())
                .filter(|p| p.iter().any(|p| p.1.is_finite()));
            if let Some(points) = baseline {
                let floor = l.floor.unwrap_or(f64::NEG_INFINITY);
                chart.lines.push(Line {
                    label: format!("baseline + {}% (maxIncrease)", trim_pct(inc)),
                    class: "tolerance".into(),
                    points: points
                        .iter()
                        .map(|&(t, v)| (t, v.max(floor) * (1.0 + inc)))
                        .collect(),
                    dashed: true,
                });
            }
        }
    }
    for a in analyses {
        if let Some(c) = a.checks.iter().find(|c| c.name == name) {
            let Some(v) = c.candidate else { continue };
            chart.markers.push(Marker {
                at: a.at.0.as_second() as f64,
                value: v,
                verdict: c.verdict.as_str(),
                count: 1,
                title: format!(
                    "{} · candidate {} vs baseline {} — {}{}",
                    clock(a.at.0.as_second() as f64),
                    value(units, name, c.candidate),
                    value(units, name, c.baseline),
                    c.verdict.as_str(),
                    c.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            });
        }
    }
    let note = if crate::analysis::is_headroom(check) {
        r#"<p class="missing">headroom is computed by the capacity model, not queried: only the analyses' values are drawn (see Capacity).</p>"#.to_string()
    } else {
        String::new()
    };
    let limit_text = limits.map(|l| l.written).unwrap_or_default();
    format!(
        r#"<section class="check" data-check="{}"><h2>{}</h2><p class="sub">{}</p><figure data-chart="{}">{}</figure>{note}{}</section>"#,
        esc(name),
        esc(name),
        esc(&limit_text),
        esc(name),
        chart.render(),
        missing_list(&missing)
    )
}

fn trim_pct(share: f64) -> String {
    let s = format!("{:.1}", share * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Adds a series' line, and says what it lacks: a failed query, no data at all, or gaps.
fn push_series(chart: &mut Chart, s: &Series, frame: &Frame, missing: &mut Vec<String>) {
    let label = s.variant.label();
    match &s.points {
        Err(e) => missing.push(format!("{label}: not drawn — {e}")),
        Ok(points) if points.iter().all(|p| !p.1.is_finite()) => missing.push(format!(
            "{label}: Prometheus has no data in this range (past its retention, not scraped, or no requests)"
        )),
        Ok(points) => {
            let (_, gaps) = segments(points, frame.from, frame.to, frame.step);
            if !gaps.is_empty() {
                let spans: Vec<String> = gaps
                    .iter()
                    .map(|(a, b)| format!("{}–{}", clock(*a), clock(*b)))
                    .collect();
                missing.push(format!("{label}: no data {}", spans.join(", ")));
            }
            chart.lines.push(Line {
                label,
                class: s.variant.class(),
                points: points.clone(),
                dashed: false,
            });
        }
    }
}

fn missing_list(missing: &[String]) -> String {
    missing
        .iter()
        .map(|m| format!(r#"<p class="missing">{}</p>"#, esc(m)))
        .collect()
}

/// The capacity gate's prediction beside the busiest pod's observed load.
pub(super) fn capacity_section(
    st: &ConcurrencyExperimentStatus,
    history: &History,
    frame: &Frame,
) -> String {
    let gate = st.capacity_gate.as_ref();
    let measured: Vec<&AnalysisRecord> = st
        .analyses
        .iter()
        .filter(|a| a.capacity.is_some())
        .collect();
    let has_load = history
        .load
        .iter()
        .any(|s| s.points.as_ref().is_ok_and(|p| !p.is_empty()));
    if gate.is_none() && measured.is_empty() && !has_load {
        return String::new();
    }
    let mut chart = frame.chart("capacity", Some(Unit::Plain));
    let mut missing = Vec::new();
    for s in &history.load {
        push_series(&mut chart, s, frame, &mut missing);
    }
    for l in &mut chart.lines {
        l.label = format!("{}: busiest pod, requests/s", l.label);
    }
    let mut text = String::new();
    if let Some(g) = gate {
        if let Some(p) = g.predicted_rate_per_pod {
            chart.limits.push(Limit {
                label: format!("predicted per candidate pod at stage {}: {p:.1}/s", g.stage),
                value: p,
                class: "prediction",
            });
        }
        if let Some(c) = g.capacity_per_pod {
            chart.limits.push(Limit {
                label: format!("estimated capacity per pod: {c:.1}/s"),
                value: c,
                class: "capacity",
            });
        }
        let _ = write!(
            text,
            r#"<p id="capacity-gate" data-verdict="{}">Capacity gate for stage {} ({}% on {} candidate pods): <strong>{}</strong> — {}</p>"#,
            g.verdict.as_str(),
            esc(&g.stage),
            g.weight,
            g.candidate_pods,
            g.verdict.as_str(),
            esc(&g.message)
        );
    }
    for a in &measured {
        let rate = a
            .capacity
            .as_ref()
            .and_then(|c| c.candidate.as_ref())
            .and_then(|c| c.per_pod_rate);
        if let Some(r) = rate {
            chart.markers.push(Marker {
                at: a.at.0.as_second() as f64,
                value: r,
                verdict: a.verdict.as_str(),
                count: 1,
                title: format!(
                    "{} · candidate's busiest pod {r:.1}/s (analysis {})",
                    clock(a.at.0.as_second() as f64),
                    a.verdict.as_str()
                ),
            });
        }
    }
    format!(
        r#"<section id="capacity"><h2>Capacity</h2>{text}<figure data-chart="capacity">{}</figure>{}</section>"#,
        chart.render(),
        missing_list(&missing)
    )
}

pub(super) fn selection_section(st: &ConcurrencyExperimentStatus) -> String {
    let Some(sel) = &st.selection else {
        return String::new();
    };
    let mut out = String::from(
        r#"<section id="selection"><h2>Selection</h2><table id="ranking"><tr><th>#</th><th>candidate</th><th>objective</th><th>headroom</th><th>verdict</th><th>why</th></tr>"#,
    );
    for (rank, r) in sel.ranking.iter().enumerate() {
        let winner = sel.winner == Some(r.index);
        let _ = write!(
            out,
            r#"<tr data-index="{}"{}><td>{}</td><td>{}{}</td><td class="num">{}</td><td class="num">{}</td><td class="v-{}">{}</td><td>{}</td></tr>"#,
            r.index,
            if winner { r#" class="winner""# } else { "" },
            rank + 1,
            esc(&r.summary),
            if winner { " ← chosen" } else { "" },
            r.objective.map(|o| format!("{o:.4}")).unwrap_or("-".into()),
            r.headroom
                .map(|h| format!("{:.0}%", h * 100.0))
                .unwrap_or("-".into()),
            r.verdict.as_str(),
            r.verdict.as_str(),
            esc(r.reason.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>");
    for v in &sel.variants {
        if let Some(e) = &v.eliminated {
            let _ = write!(
                out,
                r#"<p class="eliminated">{} eliminated at {}: {}</p>"#,
                esc(&v.summary),
                clock(e.at.0.as_second() as f64),
                esc(&e.message)
            );
        }
    }
    if let Some(m) = &sel.message {
        let _ = write!(out, "<p>{}</p>", esc(m));
    }
    out.push_str("</section>");
    out
}

/// Every analysis status keeps, one row per check, values unformatted in `data-` attributes.
pub(super) fn analyses_table(
    exp: &ConcurrencyExperiment,
    st: &ConcurrencyExperimentStatus,
    units: &BTreeMap<String, Unit>,
) -> String {
    let mut out = String::from(
        r#"<section id="analyses"><h2>Analyses</h2><table><tr><th>at</th><th>stage</th><th>weight</th><th>analysis</th><th>check</th><th>baseline</th><th>candidate</th><th>check verdict</th><th>why</th></tr>"#,
    );
    for a in &st.analyses {
        let at = crate::kubectl::table::time(&a.at);
        for c in &a.checks {
            let raw = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            let _ = write!(
                out,
                r#"<tr class="analysis" data-at="{}" data-check="{}" data-baseline="{}" data-candidate="{}" data-verdict="{}" data-analysis-verdict="{}"><td>{}</td><td>{}</td><td class="num">{}%</td><td class="v-{}">{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="v-{}">{}</td><td>{}</td></tr>"#,
                esc(&at),
                esc(&c.name),
                raw(c.baseline),
                raw(c.candidate),
                c.verdict.as_str(),
                a.verdict.as_str(),
                clock(a.at.0.as_second() as f64),
                esc(&render::stage_of(exp, a.stage_index)),
                a.weight,
                a.verdict.as_str(),
                a.verdict.as_str(),
                esc(&c.name),
                esc(&value(units, &c.name, c.baseline)),
                esc(&value(units, &c.name, c.candidate)),
                c.verdict.as_str(),
                c.verdict.as_str(),
                esc(c.reason.as_deref().unwrap_or(""))
            );
        }
    }
    out.push_str("</table>");
    if st.analyses.is_empty() {
        out.push_str(r#"<p class="missing">No analysis has run.</p>"#);
    }
    if let Some(r) = &st.recommendation {
        let _ = write!(
            out,
            r#"<p id="recommendation">Recommendation: {}</p>"#,
            esc(&r.message)
        );
    }
    out.push_str("</section>");
    out
}

pub(super) fn queries(history: &History) -> String {
    let mut out = String::from("<details><summary>Queries</summary><ul>");
    for (name, series) in &history.checks {
        for s in series {
            let _ = write!(
                out,
                "<li>{} · {}: <code>{}</code></li>",
                esc(name),
                esc(&s.variant.label()),
                esc(&s.query)
            );
        }
    }
    for s in &history.load {
        let _ = write!(
            out,
            "<li>load · {}: <code>{}</code></li>",
            esc(&s.variant.label()),
            esc(&s.query)
        );
    }
    out.push_str("</ul></details>");
    out
}
