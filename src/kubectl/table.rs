//! Aligned tables, times, ages and verdict marks: the plain pieces every view is made of.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::Verdict;

/// Columns separated by two spaces, padded to the widest cell (counted in characters, so
/// `×` and `✓` take one column), without trailing blanks.
#[derive(Debug, Clone, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    indent: String,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Table {
            rows: vec![header.into_iter().map(Into::into).collect()],
            indent: String::new(),
        }
    }

    pub fn indented(mut self, indent: &str) -> Self {
        self.indent = indent.to_string();
        self
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Widths of every column over all rows so far.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths = Vec::new();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                let w = cell.chars().count();
                match widths.get_mut(i) {
                    Some(old) if *old < w => *old = w,
                    Some(_) => {}
                    None => widths.push(w),
                }
            }
        }
        widths
    }

    pub fn render(&self) -> String {
        let widths = self.widths();
        self.rows
            .iter()
            .map(|row| format!("{}\n", line(&self.indent, row, &widths)))
            .collect()
    }
}

/// One row padded to `widths` (a cell wider than its column just pushes the rest right).
pub fn line(indent: &str, cells: &[String], widths: &[usize]) -> String {
    let mut out = indent.to_string();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push_str("  ");
        }
        out.push_str(cell);
        let w = widths.get(i).copied().unwrap_or(0);
        out.extend(std::iter::repeat_n(
            ' ',
            w.saturating_sub(cell.chars().count()),
        ));
    }
    out.trim_end().to_string()
}

/// `2026-11-30T01:20:00Z`: UTC, whole seconds, as the API server writes times.
pub fn time(t: &Time) -> String {
    t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// kubectl's short ages: `45s`, `3m20s`, `12m`, `5h10m`, `2d3h`, `40d`, `3y`.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = now.as_second().saturating_sub(then.as_second()).max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if m < 10 => match secs % 60 {
            0 => format!("{m}m"),
            s => format!("{m}m{s}s"),
        },
        _ if m < 3 * 60 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            mm => format!("{h}h{mm}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{d}d"),
            hh => format!("{d}d{hh}h"),
        },
        _ if d < 365 * 2 => format!("{d}d"),
        _ => format!("{}y", d / 365),
    }
}

pub fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "✓",
        Verdict::Fail => "✗",
        Verdict::Inconclusive => "?",
    }
}
