//! Time-series charts as inline SVG: the report opens anywhere, with no script and no network,
//! and a test can read every line, limit and stage boundary from the DOM.
//!
//! A series is drawn in segments: where Prometheus has no sample for longer than two steps the
//! line stops and the span is shaded "no data" — never drawn as zero.

use std::fmt::Write;

use jiff::Timestamp;

use crate::analysis::Unit;

const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 28.0;

/// One chart: lines over time, limits across it, stage boundaries, analysis markers.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// `data-chart` of the figure, e.g. the check's name.
    pub id: String,
    pub unit: Option<Unit>,
    /// Unix seconds.
    pub from: f64,
    pub to: f64,
    /// The query step: points further apart than two steps are a gap.
    pub step: f64,
    pub lines: Vec<Line>,
    pub limits: Vec<Limit>,
    pub stages: Vec<StageMark>,
    pub markers: Vec<Marker>,
    /// Draw the lines as steps (a weight holds until it changes).
    pub stepped: bool,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    /// CSS class: its colour (`baseline`, `candidate`, `variant-2`, `fresh`, `tolerance`).
    pub class: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// A horizontal line, e.g. `max 250ms`.
#[derive(Debug, Clone)]
pub struct Limit {
    pub label: String,
    pub value: f64,
    pub class: &'static str,
}

/// A vertical line where a stage began, labelled with the stage and its weight.
#[derive(Debug, Clone)]
pub struct StageMark {
    pub at: f64,
    pub label: String,
}

/// One analysis' value, coloured by its verdict.
#[derive(Debug, Clone)]
pub struct Marker {
    pub at: f64,
    pub value: f64,
    /// `Pass`, `Fail` or `Inconclusive`.
    pub verdict: &'static str,
    /// How many analyses it stands for (several end within one step of a long experiment).
    pub count: u32,
    pub title: String,
}

/// `text` safe inside HTML or SVG text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `14:05:20` (UTC) for unix seconds.
pub fn clock(t: f64) -> String {
    match Timestamp::from_second(t.floor() as i64) {
        Ok(ts) => ts.strftime("%H:%M:%S").to_string(),
        Err(_) => format!("{t}"),
    }
}

/// `(unix seconds, value)` points of one unbroken run.
pub type Run = Vec<(f64, f64)>;
/// `(from, to)` in unix seconds.
pub type Span = (f64, f64);

/// The runs of a series with samples at most two steps apart (non-finite values end a run),
/// and the spans in `from..to` that have none: what the chart leaves blank and says.
pub fn segments(points: &[(f64, f64)], from: f64, to: f64, step: f64) -> (Vec<Run>, Vec<Span>) {
    let max_gap = 2.0 * step.max(1.0);
    let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    for &(t, v) in points {
        let joined = current.last().is_some_and(|&(last, _)| t - last <= max_gap);
        if (!v.is_finite() || !joined) && !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
        if v.is_finite() {
            current.push((t, v));
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    let mut gaps = Vec::new();
    let mut covered_to = from;
    for run in &runs {
        let (start, end) = (run[0].0, run[run.len() - 1].0);
        if start - covered_to > max_gap {
            gaps.push((covered_to, start));
        }
        covered_to = covered_to.max(end);
    }
    if to - covered_to > max_gap {
        gaps.push((covered_to, to));
    }
    (runs, gaps)
}

impl Chart {
    fn value_range(&self) -> (f64, f64) {
        let values = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .chain(self.limits.iter().map(|l| l.value))
            .chain(self.markers.iter().map(|m| m.value))
            .filter(|v| v.is_finite());
        let (mut lo, mut hi) = (0.0f64, f64::NEG_INFINITY);
        for v in values {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !hi.is_finite() || hi <= lo {
            hi = lo + 1.0;
        }
        (lo, hi + (hi - lo) * 0.08)
    }

    fn format(&self, v: f64) -> String {
        match self.unit.unwrap_or(Unit::Plain) {
            // Ticks of a plain number (requests/s, a weight): three significant digits.
            Unit::Plain => {
                let digits = (2 - v.abs().max(1e-9).log10().floor() as i32).clamp(0, 4) as usize;
                let s = format!("{v:.digits$}");
                match s.contains('.') {
                    true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
                    false => s,
                }
            }
            unit => unit.format(v),
        }
    }

    /// The chart as an `<svg>` element and its legend.
    pub fn render(&self) -> String {
        let (lo, hi) = self.value_range();
        let span = (self.to - self.from).max(1.0);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let x = |t: f64| LEFT + (t - self.from).clamp(0.0, span) / span * plot_w;
        let y = |v: f64| TOP + plot_h - (v.clamp(lo, hi) - lo) / (hi - lo) * plot_h;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">"#
        );
        // Axes and ticks.
        for i in 0..=4 {
            let v = lo + (hi - lo) * f64::from(i) / 4.0;
            let yy = y(v);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 6.0,
                yy + 4.0,
                esc(&self.format(v))
            );
        }
        for i in 0..=5 {
            let t = self.from + span * f64::from(i) / 5.0;
            let anchor = match i {
                0 => "start",
                5 => "end",
                _ => "middle",
            };
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                x(t),
                HEIGHT - 8.0,
                clock(t)
            );
        }
        // Each line's runs and gaps, once: the gaps no line fills are shaded (their span as
        // the title), the runs drawn below.
        let cut: Vec<(Vec<Run>, Vec<Span>)> = self
            .lines
            .iter()
            .map(|l| segments(&l.points, self.from, self.to, self.step))
            .collect();
        let mut all_gaps: Option<Vec<Span>> = None;
        for (_, gaps) in &cut {
            all_gaps = Some(match all_gaps {
                None => gaps.clone(),
                Some(prev) => intersect(&prev, gaps),
            });
        }
        for (a, b) in all_gaps.unwrap_or_default() {
            let _ = write!(
                s,
                r#"<rect class="nodata" x="{:.1}" y="{TOP}" width="{:.1}" height="{plot_h}"><title>no data {} – {}</title></rect>"#,
                x(a),
                (x(b) - x(a)).max(1.0),
                clock(a),
                clock(b)
            );
        }
        // Labels of stages that began close together go on two rows.
        let mut last_label: Option<(f64, bool)> = None;
        for stage in &self.stages {
            let xx = x(stage.at);
            let upper = matches!(last_label, Some((lx, low)) if xx - lx < 110.0 && !low);
            let label_y = if upper { TOP - 16.0 } else { TOP - 4.0 };
            last_label = Some((xx, upper));
            let _ = write!(
                s,
                // Labelled above the plot, where no line or limit can hide it.
                r#"<g class="stage" data-at="{}"><line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                stage.at,
                label_y - 10.0,
                TOP + plot_h,
                xx + 3.0,
                label_y,
                esc(&stage.label)
            );
        }
        for limit in &self.limits {
            let yy = y(limit.value);
            let _ = write!(
                s,
                r#"<g class="limit {}" data-value="{}"><line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text></g>"#,
                limit.class,
                limit.value,
                WIDTH - RIGHT,
                WIDTH - RIGHT - 2.0,
                yy - 3.0,
                esc(&limit.label)
            );
        }
        for (line, (runs, _)) in self.lines.iter().zip(cut) {
            let dash = if line.dashed { " dashed" } else { "" };
            let _ = write!(
                s,
                r#"<g class="series {}{dash}" data-series="{}" data-points="{}">"#,
                esc(&line.class),
                esc(&line.label),
                line.points.iter().filter(|p| p.1.is_finite()).count()
            );
            for run in runs {
                if run.len() == 1 {
                    let (t, v) = run[0];
                    let _ = write!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="2"/>"#, x(t), y(v));
                    continue;
                }
                let mut d = String::new();
                let mut prev: Option<f64> = None;
                for (i, &(t, v)) in run.iter().enumerate() {
                    match (i, self.stepped, prev) {
                        (0, _, _) => {
                            let _ = write!(d, "M{:.1} {:.1}", x(t), y(v));
                        }
                        // A weight holds until it changes: across, then up or down.
                        (_, true, Some(pv)) if pv != v => {
                            let _ =
                                write!(d, " L{:.1} {:.1} L{:.1} {:.1}", x(t), y(pv), x(t), y(v));
                        }
                        _ => {
                            let _ = write!(d, " L{:.1} {:.1}", x(t), y(v));
                        }
                    }
                    prev = Some(v);
                }
                let _ = write!(s, r#"<path d="{d}"/>"#);
            }
            s.push_str("</g>");
        }
        for m in &self.markers {
            if !m.value.is_finite() {
                continue;
            }
            let _ = write!(
                s,
                r#"<circle class="marker {}" data-count="{}" cx="{:.1}" cy="{:.1}" r="4"><title>{}</title></circle>"#,
                m.verdict,
                m.count,
                x(m.at),
                y(m.value),
                esc(&m.title)
            );
        }
        s.push_str("</svg>");
        s.push_str(r#"<ul class="legend">"#);
        for line in &self.lines {
            let dash = if line.dashed { " dashed" } else { "" };
            let _ = write!(
                s,
                r#"<li><span class="swatch {}{dash}"></span>{}</li>"#,
                esc(&line.class),
                esc(&line.label)
            );
        }
        if !self.markers.is_empty() {
            s.push_str(
                r#"<li><span class="dot Pass"></span>analysis passed</li><li><span class="dot Fail"></span>failed</li><li><span class="dot Inconclusive"></span>inconclusive</li>"#,
            );
        }
        s.push_str("</ul>");
        s
    }
}

/// The spans both lists cover (each sorted and disjoint).
fn intersect(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            let (lo, hi) = (a0.max(b0), a1.min(b1));
            if hi > lo {
                out.push((lo, hi));
            }
        }
    }
    out
}
