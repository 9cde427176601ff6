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
}
