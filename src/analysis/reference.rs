//! The baseline's values at 100 % weight, when it serves nothing and cannot be measured.

use std::collections::BTreeMap;

use crate::api::{AnalysisRecord, BaselineReference};

/// The baseline value a check at 100% is compared with: the stage machine's reference, else
/// (a status written before the reference existed) the latest one still in the history.
pub fn reference_baseline(
    reference: &BTreeMap<String, BaselineReference>,
    history: &[AnalysisRecord],
    name: &str,
) -> Option<f64> {
    reference
        .get(name)
        .map(|r| r.value)
        .filter(|v| v.is_finite())
        .or_else(|| last_baseline(history, name))
}

/// The baseline's value of check `name` in the latest analysis that measured one (while the
/// baseline still served traffic).
pub fn last_baseline(history: &[AnalysisRecord], name: &str) -> Option<f64> {
    history
        .iter()
        .rev()
        .filter(|a| a.weight < 100)
        .flat_map(|a| a.checks.iter())
        .find(|c| c.name == name && c.baseline.is_some_and(f64::is_finite))
        .and_then(|c| c.baseline)
}
