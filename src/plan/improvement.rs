//! The promotion gate's "better enough": once every stage has passed, each check with
//! `minImprovement` is judged over the experiment's intervals (analysis::improvement). Unmet,
//! an automatic promotion becomes a rollback with reason `NotImproved`; a manual or GitOps
//! promotion still holds for its person or commit, told why it should perhaps not happen.

use super::ctx::Ctx;
use super::observations::EventType;
use crate::analysis::improvement;
use crate::api::reason::DecisionReason;
use crate::api::{truncate, Promotion};

/// `status.improvement` is one sentence per check; 32 checks fit.
const MAX_TEXT: usize = 4096;

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No check asks for an improvement.
    NotAsked,
    Met(String),
    Unmet(String),
}

/// Judges the requirement and keeps the result in `status.improvement`. A held promotion is
/// warned once (Event `NotImproved`), at the first judgement; an automatic one rolls back.
pub fn judge(cx: &mut Ctx) -> Outcome {
    let results = match improvement::judge(&cx.spec.analysis, &cx.status.analyses) {
        Ok(r) => r,
        // Validated before the experiment started; an unreadable value is not a pass.
        Err(e) => return Outcome::Unmet(e.to_string()),
    };
    if results.is_empty() {
        return Outcome::NotAsked;
    }
    let text = truncate(
        &results
            .iter()
            .map(|r| r.detail.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        MAX_TEXT,
    );
    let met = results.iter().all(|r| r.met);
    let was = cx.status.improvement.replace(text.clone());
    if !met && was.is_none() && cx.spec.promotion != Promotion::Auto {
        cx.event(
            EventType::Warning,
            DecisionReason::NotImproved.as_str(),
            format!("All stages passed, but not better enough to switch: {text}"),
        );
    }
    if met {
        Outcome::Met(text)
    } else {
        Outcome::Unmet(text)
    }
}
