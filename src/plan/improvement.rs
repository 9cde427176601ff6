//! After the last stage: promote, hold for a person (`promotion: manual`) or for Git
//! (`external`) — or, not better enough, roll back. "Better enough": each check with
//! `minImprovement` is judged over the experiment's intervals (analysis::improvement); unmet,
//! an automatic promotion becomes a rollback with reason `NotImproved`, and a manual or GitOps
//! promotion still holds for its person or commit, told why it should perhaps not happen.

use super::ctx::Ctx;
use super::observations::EventType;
use super::{external, finish, pause};
use crate::analysis::improvement;
use crate::api::reason::EventReason;
use crate::api::reason::{DecisionReason, HoldReason};
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
            EventReason::Decision(DecisionReason::NotImproved),
            format!("All stages passed, but not better enough to switch: {text}"),
        );
    }
    if met {
        Outcome::Met(text)
    } else {
        Outcome::Unmet(text)
    }
}

/// Every stage has passed. `true` when the experiment left the stages (promoting, or rolling
/// back as not better enough); `false` while it holds for a person or for Git.
pub fn after_the_last_stage(cx: &mut Ctx) -> bool {
    let judged = judge(cx);
    match cx.spec.promotion {
        Promotion::Auto => {
            let (reason, msg) = match judged {
                Outcome::Unmet(why) => {
                    let msg = format!(
                        "All stages passed, but the candidate is not better enough to switch: \
                         {why}. Rolling back to the baseline."
                    );
                    cx.start_rollback(DecisionReason::NotImproved, msg);
                    finish::roll_back(cx);
                    return true;
                }
                Outcome::Met(better) => (
                    DecisionReason::StagesPassed,
                    format!(
                        "All stages passed and the candidate is better enough ({better}): \
                         promoting the candidate into the target."
                    ),
                ),
                Outcome::NotAsked => (
                    DecisionReason::StagesPassed,
                    "All stages passed: promoting the candidate into the target.".to_string(),
                ),
            };
            cx.start_promotion(reason, msg);
            finish::promote(cx);
            true
        }
        Promotion::External => {
            external::hold(cx);
            false
        }
        Promotion::Manual => match pause::approve_promotion(cx) {
            Some(by) => {
                let msg = format!(
                    "All stages passed, approved by {by}: promoting the candidate into the target."
                );
                cx.start_promotion(DecisionReason::Approved, msg);
                finish::promote(cx);
                true
            }
            None => {
                cx.set_hold(Some(HoldReason::AwaitingApproval));
                false
            }
        },
    }
}
