//! The verdict of a check or an analysis, and one check's result: shared by the stages'
//! analyses (`status`) and the selection's ranking (`selection`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "Pass",
            Verdict::Fail => "Fail",
            Verdict::Inconclusive => "Inconclusive",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub name: String,
    // No `query`: status keeps it once per check (`status.queries`). Status written by an
    // older operator has one here; unknown fields are ignored when it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<f64>,
    /// The limits as written, e.g. `max 500ms, maxIncrease 10%` (newest analysis only: see
    /// `ConcurrencyExperimentStatus::bound`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub limit: String,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the anytime-valid tests show so far in the stage (`judge: sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

impl CheckResult {
    /// What its sequential test has shown; `None` for a check judged per interval.
    pub fn shown(&self) -> Option<Shown> {
        self.evidence.as_ref().map(|e| e.shown)
    }

    /// It failed because its sequential test showed the candidate beyond a limit: a verdict
    /// on the whole stage, which neither a thin interval nor `failureLimit` holds back.
    pub fn shown_worse(&self) -> bool {
        self.verdict == Verdict::Fail && self.shown() == Some(Shown::Worse)
    }
}

/// A sequential check's evidence over every request of the stage so far: the bounds it has
/// shown on candidate / baseline, and what they decide. Bounds hold at the experiment's
/// `falseRollbackRate` (split over its tests), however often they are looked at.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub shown: Shown,
    /// The candidate's value is shown above this multiple of the baseline's (`maxIncrease`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_above: Option<f64>,
    /// … and shown within this multiple of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_within: Option<f64>,
    /// Requests in the stage so far: the candidate's, and the baseline's (at 100 %: its last
    /// stage's).
    pub candidate_requests: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_requests: Option<f64>,
    /// Requests each variant still needs before the test can show anything (`waiting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_requests: Option<f64>,
}

/// What a sequential check has shown.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Shown {
    /// Beyond a limit: the check fails and the experiment rolls back now.
    Worse,
    /// Within every limit: the stage may end early.
    NoWorse,
    /// Neither yet: the check passes (nothing shows a regression), the stage runs on.
    Open,
    /// Too few requests for any bound: Inconclusive, not counted while the stage runs.
    Waiting,
}

impl Shown {
    pub fn as_str(self) -> &'static str {
        match self {
            Shown::Worse => "worse",
            Shown::NoWorse => "noWorse",
            Shown::Open => "open",
            Shown::Waiting => "waiting",
        }
    }
}
