//! One selection interval folded into status: per candidate its checks against the fresh
//! baseline, headroom, objective samples and counts; elimination past `failureLimit` (Event
//! `CandidateEliminated`); and whether the interval had signal at all.

use crate::api::reason::EventReason;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::analysis;
use super::ctx::Ctx;
use super::observations::{EventType, SelectionAnalysis};
use crate::api::{parse_duration, AnalysisRecord, Elimination, Verdict, KEPT_ANALYSES};

/// Below this utilization (busiest pod's rate / estimated capacity) on every variant an
/// analysis is low signal: latency and queue time cannot tell configs apart there.
pub const LOW_SIGNAL_UTILIZATION: f64 = 0.3;
pub const CANDIDATE_ELIMINATED: &str = EventReason::CandidateEliminated.as_str();

/// Folds one interval into the variants (once: an analysis not newer than
/// `last_analysis_at` is a replay). Eliminates candidates past `failureLimit`.
pub(super) fn record(cx: &mut Ctx, a: &SelectionAnalysis) {
    if cx
        .status
        .last_analysis_at
        .as_ref()
        .is_some_and(|l| a.at <= l.0)
    {
        return;
    }
    cx.status.last_analysis_at = Some(Time(a.at));
    let limit = cx.spec.analysis.failure_limit;
    let min_requests = cx.spec.analysis.min_requests as f64;
    let interval_s = parse_duration("spec.analysis.interval", &cx.spec.analysis.interval)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut utilizations = Vec::new();
    let mut eliminated = Vec::new();
    for ca in &a.candidates {
        analysis::remember_queries(&mut cx.status, cx.spec, &ca.outcome.queries);
    }
    let st = cx.selection();
    for ca in &a.candidates {
        let Some(v) = st
            .variants
            .get_mut(ca.index)
            .filter(|v| v.eliminated.is_none())
        else {
            continue;
        };
        let rec = &ca.outcome.record;
        v.checks = rec.checks.clone();
        let cap = rec.capacity.as_ref();
        let headroom = cap
            .and_then(|c| c.candidate.as_ref())
            .and_then(|c| c.headroom);
        if let Some(h) = headroom {
            v.headroom = Some(v.headroom.map_or(h, |old: f64| old.min(h)));
        }
        utilizations.push(headroom.map(|h| 1.0 - h));
        if let Some(sample) = capacity_sample(rec, interval_s, min_requests) {
            v.capacity_samples.push(sample);
            let excess = v.capacity_samples.len().saturating_sub(KEPT_ANALYSES);
            v.capacity_samples.drain(..excess);
        }
        if ca.outcome.record.verdict == Verdict::Inconclusive {
            continue;
        }
        if let (Some(o), Some(b)) = (ca.objective, a.fresh_baseline_objective) {
            push_capped(&mut v.objective_samples, o);
            push_capped(&mut v.baseline_samples, b);
        }
        if rec.verdict == Verdict::Pass {
            v.passed_analyses += 1;
            continue;
        }
        v.failed_analyses += 1;
        if v.failed_analyses > limit {
            let message = format!(
                "Candidate {} eliminated after {} failed analyses against the fresh baseline \
                 ({}); its traffic returns to the baseline and its pods are removed.",
                v.summary,
                v.failed_analyses,
                analysis::failing_checks(rec)
            );
            let checks = rec
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| c.name.clone())
                .collect();
            v.eliminated = Some(Elimination {
                at: Time(a.at),
                checks,
                message: message.clone(),
            });
            eliminated.push(message);
        }
    }
    // The fresh baseline's own utilization comes with every candidate's record.
    let base = a
        .candidates
        .first()
        .and_then(|c| c.outcome.record.capacity.as_ref())
        .and_then(|c| c.baseline.as_ref())
        .and_then(|b| b.headroom);
    utilizations.push(base.map(|h| 1.0 - h));
    let low = !utilizations.is_empty()
        && utilizations
            .iter()
            .all(|u| u.is_some_and(|u| u < LOW_SIGNAL_UTILIZATION));
    if low {
        st.low_signal_analyses += 1;
    } else {
        st.signal_analyses += 1;
    }
    for msg in eliminated {
        cx.event(EventType::Warning, EventReason::CandidateEliminated, msg);
    }
}

/// The record's capacity measurement, for the step into stage 1 should this candidate win:
/// without its checks, and with the Service's total rate estimated from the candidate's own
/// (its requests over the interval, over its share). None without enough requests; kept
/// without the CPU and I/O times too, so the gate can say which ones Prometheus lacked.
fn capacity_sample(
    rec: &AnalysisRecord,
    interval_s: f64,
    min_requests: f64,
) -> Option<AnalysisRecord> {
    let requests = rec
        .candidate_requests
        .filter(|r| *r >= min_requests && *r > 0.0)?;
    let mut capacity = rec.capacity.clone().unwrap_or_default();
    if interval_s <= 0.0 || rec.weight <= 0 {
        return None;
    }
    capacity.baseline = None;
    capacity.total_rate = Some(requests / interval_s * 100.0 / f64::from(rec.weight));
    Some(AnalysisRecord {
        checks: Vec::new(),
        reason: None,
        baseline_requests: None,
        capacity: Some(capacity),
        ..rec.clone()
    })
}

fn push_capped(v: &mut Vec<f64>, x: f64) {
    v.push(x);
    let excess = v.len().saturating_sub(KEPT_ANALYSES + 1);
    v.drain(..excess);
}
