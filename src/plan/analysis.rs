//! Folding one analysis outcome into status: counters, history, and the limits that roll back
//! or hold the experiment.

use super::conditions;
use super::ctx::Ctx;
use super::observations::{AnalysisOutcome, EventType};
use crate::api::reason::EventReason;
use crate::api::reason::{DecisionReason, HoldReason};
use jiff::Timestamp;
use std::collections::BTreeMap;

use crate::api::{
    truncate, AnalysisRecord, BaselineReference, CheckResult, ConcurrencyExperimentSpec,
    ConcurrencyExperimentStatus, InconclusiveAction, Shown, Verdict, QUERY_BYTES,
};

pub use crate::api::KEPT_ANALYSES;
/// `hold_reason` while inconclusive analyses exceed the limit with `onInconclusive: pause`.
pub const INCONCLUSIVE_LIMIT: &str = HoldReason::InconclusiveLimit.as_str();
/// Consecutive analyses without any data before the `NoData` warning.
pub const NO_DATA_LIMIT: i32 = 3;

/// Records `obs.analysis` (once: a replayed record, not newer than `last_analysis_at`, is
/// ignored). Returns true when it started a rollback. `stage_end`: when the stage's duration
/// is over (sequential checks still waiting for requests count as inconclusive only after it).
pub fn record(cx: &mut Ctx, stage_index: usize, stage_end: Option<Timestamp>) -> bool {
    let (spec, obs) = (cx.spec, cx.obs);
    let Some(outcome) = &obs.analysis else {
        return false;
    };
    let rec = &outcome.record;
    if cx
        .status
        .last_analysis_at
        .as_ref()
        .is_some_and(|last| rec.at.0 <= last.0)
    {
        return false;
    }
    let st = &mut cx.status;
    st.analyses.push(rec.clone());
    let excess = st.analyses.len().saturating_sub(KEPT_ANALYSES);
    st.analyses.drain(..excess);
    st.last_verdict = Some(rec.verdict);
    st.last_analysis_at = Some(rec.at.clone());
    if let Some(r) = &outcome.recommendation {
        st.recommendation = Some(r.clone());
    }
    remember_queries(st, spec, &outcome.queries);
    remember_baseline(st, rec, spec.analysis.min_requests);
    count_no_data(cx, outcome);
    let st = &mut cx.status;
    let limits = &spec.analysis;
    let at = describe_stage(rec);
    match rec.verdict {
        Verdict::Pass => {
            // Only an analysis of the split in force counts towards advancing this stage.
            let in_stage = st
                .stage_started_at
                .as_ref()
                .is_some_and(|s| rec.at.0 >= s.0);
            if in_stage && rec.stage_index as usize == stage_index {
                st.stage_passed_analyses += 1;
            }
            false
        }
        Verdict::Fail if shown_worse(&rec.checks) => {
            // An anytime-valid test crossed its bound: the evidence is already as strong as
            // the experiment asked for, so no further failed analysis is waited for.
            st.failed_analyses += 1;
            let why = failing_checks(rec);
            let msg = format!("Analysis {at} failed: {why}.");
            cx.event(EventType::Warning, EventReason::AnalysisFailed, msg);
            let msg = format!(
                "Rolling back: the sequential test shows the candidate beyond its limit \
                 (falseRollbackRate {}); {why}.",
                limits.false_rollback_rate
            );
            cx.start_rollback(DecisionReason::CheckFailed, msg);
            true
        }
        Verdict::Fail => {
            st.failed_analyses += 1;
            let (n, limit) = (st.failed_analyses, limits.failure_limit);
            let why = failing_checks(rec);
            let msg = format!("Analysis {at} failed ({n} failed, {limit} tolerated): {why}.");
            cx.event(EventType::Warning, EventReason::AnalysisFailed, msg);
            if n > limit {
                let msg = format!(
                    "Rolling back: {n} failed analyses exceed failureLimit {limit}; {why}."
                );
                cx.start_rollback(DecisionReason::CheckFailed, msg);
                return true;
            }
            false
        }
        Verdict::Inconclusive
            if only_waiting(&rec.checks) && stage_end.is_some_and(|end| rec.at.0 < end) =>
        {
            // Sequential checks still collecting the requests any bound needs: the stage's
            // time is theirs; only when it is over does "not enough data" count.
            false
        }
        Verdict::Inconclusive => {
            let why = rec
                .reason
                .clone()
                .unwrap_or_else(|| "not enough data".into());
            count_inconclusive(cx, &at, &why)
        }
    }
}

/// Counts one inconclusive analysis (`at`: where it ran, `why`: its reason) against
/// `inconclusiveLimit`; beyond it rolls back or holds as `onInconclusive` says. Returns true
/// when it started a rollback. Also used by the capacity gate for an analysis that passed
/// its checks but still cannot predict the next step.
pub fn count_inconclusive(cx: &mut Ctx, at: &str, why: &str) -> bool {
    let limits = &cx.spec.analysis;
    let st = &mut cx.status;
    st.inconclusive_analyses += 1;
    let (n, limit) = (st.inconclusive_analyses, limits.inconclusive_limit);
    let msg =
        format!("Analysis {at} was inconclusive ({n} inconclusive, {limit} tolerated): {why}.");
    cx.event(EventType::Warning, EventReason::AnalysisInconclusive, msg);
    if n <= limit {
        return false;
    }
    match limits.on_inconclusive {
        InconclusiveAction::Rollback => {
            let hint = if cx.status.no_data_analyses >= NO_DATA_LIMIT {
                " No check had data in the last analyses; see the NoData condition."
            } else {
                ""
            };
            let msg = format!(
                "Rolling back: {n} inconclusive analyses exceed inconclusiveLimit {limit}; \
                 last: {why}.{hint}"
            );
            cx.start_rollback(DecisionReason::InconclusiveLimit, msg);
            true
        }
        InconclusiveAction::Pause => {
            // The Paused event is emitted where the phase changes.
            cx.set_hold(Some(HoldReason::InconclusiveLimit));
            false
        }
    }
}

/// `status.queries`: each check's latest query, once; a check no longer in the spec is
/// dropped (its name could otherwise linger for ever).
pub fn remember_queries(
    st: &mut ConcurrencyExperimentStatus,
    spec: &ConcurrencyExperimentSpec,
    queries: &BTreeMap<String, String>,
) {
    st.queries.extend(
        queries
            .iter()
            .map(|(k, v)| (k.clone(), truncate(v, QUERY_BYTES))),
    );
    let names: Vec<String> = spec
        .analysis
        .checks
        .iter()
        .map(|c| c.display_name())
        .collect();
    st.queries.retain(|k, _| names.contains(k));
}

/// Keeps each check's baseline value of an analysis the baseline served enough requests in,
/// for the analyses at 100% (where the baseline serves nothing). Thin intervals are noise,
/// as for the statistical samples.
fn remember_baseline(st: &mut ConcurrencyExperimentStatus, rec: &AnalysisRecord, min: i64) {
    let served = rec.baseline_requests.is_some_and(|r| r >= min as f64);
    if rec.weight >= 100 || !served {
        return;
    }
    for c in &rec.checks {
        if let Some(value) = c.baseline.filter(|v| v.is_finite()) {
            let r = BaselineReference {
                value,
                at: rec.at.clone(),
                stage_index: rec.stage_index,
                weight: rec.weight,
            };
            st.baseline_reference.insert(c.name.clone(), r);
        }
    }
}

/// Counts analyses in a row without any data; at `NO_DATA_LIMIT` warns once (Event and the
/// `NoData` condition, which stays until data shows up), since more of the same will not help.
fn count_no_data(cx: &mut Ctx, outcome: &AnalysisOutcome) {
    let (generation, now) = (cx.obs.generation, cx.now());
    let st = &mut cx.status;
    if !outcome.no_data {
        if st.no_data_analyses >= NO_DATA_LIMIT {
            let msg = "Prometheus has data for the checks again.";
            conditions::set(
                &mut st.conditions,
                conditions::NO_DATA,
                false,
                "DataSeen",
                msg,
                generation,
                now,
            );
        }
        st.no_data_analyses = 0;
        return;
    }
    st.no_data_analyses += 1;
    if st.no_data_analyses != NO_DATA_LIMIT {
        return;
    }
    let msg = format!(
        "No check had data in the last {NO_DATA_LIMIT} analyses: Prometheus returned no sample \
         for either variant. Likely causes: spec.analysis.interval ({}) is shorter than two \
         scrapes of the pods (rate() needs two samples in the window), the metric names \
         (spec.analysis.metrics, custom queries) do not match what the app exports, or \
         Prometheus does not scrape the pods.",
        cx.spec.analysis.interval
    );
    conditions::set(
        &mut st.conditions,
        conditions::NO_DATA,
        true,
        "NoData",
        &msg,
        generation,
        now,
    );
    cx.event(EventType::Warning, EventReason::NoData, msg);
}

pub fn describe_stage(rec: &AnalysisRecord) -> String {
    format!("in stage {} at {}% weight", rec.stage_index + 1, rec.weight)
}

/// For each failed check the judge's reason, which carries the metric's unit (`latency:
/// candidate 620ms is above max 500ms (baseline 410ms)`); without one, the raw values.
pub fn failing_checks(rec: &AnalysisRecord) -> String {
    let parts: Vec<String> = rec
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| match &c.reason {
            Some(reason) => format!("{}: {reason}", c.name),
            None => format!(
                "{}: candidate {}, baseline {}, limit {}",
                c.name,
                value(c.candidate),
                value(c.baseline),
                c.limit
            ),
        })
        .collect();
    if parts.is_empty() {
        rec.reason
            .clone()
            .unwrap_or_else(|| "a check failed".into())
    } else {
        parts.join("; ")
    }
}

/// A measured value for people: four significant digits at most, `no data` when absent.
pub fn value(v: Option<f64>) -> String {
    match v {
        None => "no data".into(),
        Some(v) if !v.is_finite() => v.to_string(),
        Some(v) if v.abs() >= 1000.0 || v == v.trunc() => format!("{v:.0}"),
        Some(v) => {
            let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
            let s = format!("{v:.digits$}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }
}

/// A sequential check of the analysis showed the candidate beyond a limit.
pub fn shown_worse(checks: &[CheckResult]) -> bool {
    checks.iter().any(CheckResult::shown_worse)
}

/// The analysis is inconclusive only because sequential checks wait for requests.
pub fn only_waiting(checks: &[CheckResult]) -> bool {
    let mut open = checks
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .peekable();
    open.peek().is_some() && open.all(|c| c.shown() == Some(Shown::Waiting))
}

/// Every sequential check of the analysis shows the candidate within its limits (and there is
/// at least one): with all other checks passing, the stage may end early.
pub fn shown_no_worse(checks: &[CheckResult]) -> bool {
    let mut seq = checks.iter().filter_map(CheckResult::shown).peekable();
    seq.peek().is_some() && seq.all(|s| s == Shown::NoWorse)
}
