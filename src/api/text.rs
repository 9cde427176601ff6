//! Free text bounded by bytes: everything a tenant's spec or its Prometheus can make long
//! (check reasons, messages, errors, queries) is cut to a fixed byte budget before it is
//! stored in status or sent as an Event, so an object never outgrows etcd's request limit
//! (~1.5 MiB) and an Event never exceeds the API's 1 KiB note. One home for the budgets.

use super::status::ConcurrencyExperimentStatus;

/// Marks text that was cut (3 bytes, counted within the budget).
pub const ELLIPSIS: &str = "…";

/// The serialized status of the largest spec the CRD admits stays below this (tested in
/// `plan::tests::bounds`).
pub const STATUS_BYTES: usize = 128 * 1024;
/// One check's reason (`status.analyses[].checks[].reason`, a selection variant's checks,
/// `freshBaseline.measured.checks[].reason`).
pub const CHECK_REASON_BYTES: usize = 160;
/// One check's limits as written (`max 500ms, maxIncrease 10%`).
pub const LIMIT_BYTES: usize = 128;
/// One check's query as stored in `status.queries`.
pub const QUERY_BYTES: usize = 512;
/// An analysis' one-line reason (`failed: latency, memory`).
pub const ANALYSIS_REASON_BYTES: usize = 512;
/// A sentence for people: `status.message`, the decision's message,
/// an elimination's, a ranking entry's reason, a condition's message.
pub const MESSAGE_BYTES: usize = 1024;
/// The Events API's limit on a note.
pub const EVENT_NOTE_BYTES: usize = 1024;

/// `s` cut to at most `max` bytes at a UTF-8 character boundary, ending in `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    let mut s = s.to_string();
    truncate_in_place(&mut s, max);
    s
}

/// `truncate`, in place.
pub fn truncate_in_place(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let Some(room) = max.checked_sub(ELLIPSIS.len()) else {
        // No room for the ellipsis: as much text as fits.
        let end = floor_char_boundary(s, max);
        s.truncate(end);
        return;
    };
    let end = floor_char_boundary(s, room);
    s.truncate(end);
    s.push_str(ELLIPSIS);
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, i: usize) -> usize {
    (0..=i.min(s.len()))
        .rev()
        .find(|&j| s.is_char_boundary(j))
        .unwrap_or(0)
}

fn cut(s: &mut Option<String>, max: usize) {
    if let Some(s) = s {
        truncate_in_place(s, max);
    }
}

impl ConcurrencyExperimentStatus {
    /// Keeps status within `STATUS_BYTES` whatever the spec. The stage machine applies it to
    /// each status it returns, so whatever wrote the text (a judge's reason, a Prometheus
    /// error, a message naming 32 failed checks), status holds at most the budget:
    /// - every free-text field is cut to its budget;
    /// - only the newest analysis keeps each check's limit and reason; older ones keep the
    ///   values and verdicts (what the statistical test, the baseline reference and
    ///   `kubectl cexp history` read) and their own one-line reason — their check reasons were
    ///   in that analysis' Events;
    /// - a selection variant's checks keep their reasons but not the limits, which are the
    ///   spec's and the same for every candidate; once the winner is chosen they are dropped:
    ///   the ranking, the eliminations and the choice's message explain it, and the winner's
    ///   checks go on in `analyses`.
    pub fn bound(&mut self) {
        for sel in self.selection.iter_mut().filter(|s| s.winner.is_some()) {
            sel.variants.iter_mut().for_each(|v| v.checks.clear());
        }
        let older = self.analyses.len().saturating_sub(1);
        for c in self.analyses[..older]
            .iter_mut()
            .flat_map(|a| a.checks.iter_mut())
        {
            c.limit.clear();
            c.reason = None;
        }
        for c in self
            .selection
            .iter_mut()
            .flat_map(|s| s.variants.iter_mut())
            .flat_map(|v| v.checks.iter_mut())
        {
            c.limit.clear();
        }
        let checks = self
            .analyses
            .iter_mut()
            .flat_map(|a| a.checks.iter_mut())
            .chain(
                self.selection
                    .iter_mut()
                    .flat_map(|s| s.variants.iter_mut())
                    .flat_map(|v| v.checks.iter_mut()),
            );
        for c in checks {
            truncate_in_place(&mut c.limit, LIMIT_BYTES);
            cut(&mut c.reason, CHECK_REASON_BYTES);
        }
        for a in &mut self.analyses {
            cut(&mut a.reason, ANALYSIS_REASON_BYTES);
        }
        for q in self.queries.values_mut() {
            truncate_in_place(q, QUERY_BYTES);
        }
        if let Some(sel) = &mut self.selection {
            cut(&mut sel.message, MESSAGE_BYTES);
            for v in &mut sel.variants {
                if let Some(e) = &mut v.eliminated {
                    truncate_in_place(&mut e.message, MESSAGE_BYTES);
                }
            }
            for r in &mut sel.ranking {
                cut(&mut r.reason, MESSAGE_BYTES);
            }
        }
        if let Some(m) = self
            .fresh_baseline
            .as_mut()
            .and_then(|f| f.measured.as_mut())
        {
            for c in &mut m.checks {
                cut(&mut c.reason, CHECK_REASON_BYTES);
            }
        }
        if let Some(g) = &mut self.capacity_gate {
            truncate_in_place(&mut g.message, MESSAGE_BYTES);
        }
        if let Some(d) = &mut self.decision {
            truncate_in_place(&mut d.message, MESSAGE_BYTES);
        }
        if let Some(r) = &mut self.recommendation {
            truncate_in_place(&mut r.message, MESSAGE_BYTES);
        }
        cut(&mut self.message, MESSAGE_BYTES);
        for c in &mut self.conditions {
            truncate_in_place(&mut c.message, MESSAGE_BYTES);
        }
    }
}
