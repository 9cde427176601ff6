//! What each of a person's controls does to an experiment as it stands: the rules the stage
//! machine acts by (`approval`, `pause`, `retry`, and the abort in `machine`), said once for
//! whoever offers the controls — the plugin's commands refuse or patch by it, the dashboard
//! lists what applies. Pure, like the rest of the plan.

use crate::api::reason::HoldReason;
use crate::api::{
    ConcurrencyExperiment, ConcurrencyExperimentSpec, ConcurrencyExperimentStatus, Phase,
    Promotion, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY,
};

/// The controls a person has: three one-shot annotations and `spec.paused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Approve,
    Abort,
    Retry,
    Pause,
    Resume,
}

impl Control {
    pub const ALL: [Control; 5] = [
        Control::Approve,
        Control::Abort,
        Control::Retry,
        Control::Pause,
        Control::Resume,
    ];

    /// As the plugin's command is named.
    pub fn verb(self) -> &'static str {
        match self {
            Control::Approve => "approve",
            Control::Abort => "abort",
            Control::Retry => "retry",
            Control::Pause => "pause",
            Control::Resume => "resume",
        }
    }
}

/// The requests already on the object: its one-shot annotations set to `true`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Requested {
    pub approve: bool,
    pub abort: bool,
    pub retry: bool,
}

impl Requested {
    /// As the operator reads them (`ConcurrencyExperiment::flag`).
    fn of(exp: &ConcurrencyExperiment) -> Self {
        Requested {
            approve: exp.flag(ANNOTATION_APPROVE),
            abort: exp.flag(ANNOTATION_ABORT),
            retry: exp.flag(ANNOTATION_RETRY),
        }
    }
}

/// What a control does now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Asked for now, the operator does this (a phrase: "promotes the candidate into the
    /// target").
    Does(String),
    /// Already asked for: the operator does this, nothing to ask again.
    Asked(String),
    /// It would do nothing now: why, and what works instead.
    Refused(String),
}

/// What `control` does to the experiment as it stands.
pub fn answer(control: Control, exp: &ConcurrencyExperiment) -> Answer {
    let status = exp.status.clone().unwrap_or_default();
    let (spec, status, requested) = (&exp.spec, &status, Requested::of(exp));
    match control {
        Control::Approve => approve(exp, status, requested),
        Control::Abort => abort(spec, status, requested),
        Control::Retry => retry(spec, status, requested),
        Control::Pause => pause(spec, status),
        Control::Resume => resume(spec, status),
    }
}

/// The controls that would do something now (not already asked for).
pub fn available(exp: &ConcurrencyExperiment) -> Vec<Control> {
    Control::ALL
        .into_iter()
        .filter(|c| matches!(answer(*c, exp), Answer::Does(_)))
        .collect()
}

/// `Progressing at stage 2/3`, for refusals.
fn where_(status: &ConcurrencyExperimentStatus) -> String {
    match &status.stage {
        Some(stage) if !status.phase.is_terminal() => {
            format!("{} at stage {stage}", status.phase.as_str())
        }
        _ => status.phase.as_str().to_string(),
    }
}

fn hold(status: &ConcurrencyExperimentStatus) -> Option<HoldReason> {
    status.hold_reason.as_deref().and_then(HoldReason::parse)
}

/// The approve annotation lifts the next hold a person must lift (`approval`): an
/// inconclusive or capacity hold, or the manual promotion — set at the last stage before the
/// hold, it waits for it. Git lifts the external hold, never an approval.
fn approve(
    exp: &ConcurrencyExperiment,
    status: &ConcurrencyExperimentStatus,
    requested: Requested,
) -> Answer {
    let spec = &exp.spec;
    let phase = status.phase;
    let hold = hold(status);
    if hold == Some(HoldReason::AwaitingExternalPromotion) {
        return Answer::Refused(format!(
            "is held for Git ({}): with promotion: external the commit promotes, never an \
             approval — `kubectl concurrency get {}` shows the patch to commit",
            HoldReason::AwaitingExternalPromotion.as_str(),
            exp.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let held = phase == Phase::Paused && hold.is_some();
    let last = i64::try_from(spec.stages.len()).unwrap_or(i64::MAX) - 1;
    let at_gate = spec.promotion == Promotion::Manual
        && matches!(phase, Phase::Progressing | Phase::Paused)
        && status.stage_index.map(i64::from) == Some(last);
    if !held && !at_gate {
        return Answer::Refused(if phase == Phase::Paused {
            "paused by spec.paused, not held for approval; `kubectl concurrency resume` \
             continues it"
                .to_string()
        } else {
            format!(
                "is {}; approve lifts a hold (phase Paused with holdReason {}, {} or {}) or \
                 the manual promotion at the last stage — nothing to approve",
                where_(status),
                HoldReason::InconclusiveLimit.as_str(),
                HoldReason::InsufficientCapacity.as_str(),
                HoldReason::AwaitingApproval.as_str(),
            )
        });
    }
    if status.approve_annotation_consumed {
        return Answer::Refused(still_removed("approval"));
    }
    let what = match hold {
        Some(HoldReason::InconclusiveLimit) => {
            "lifts the inconclusive hold (the count starts again)".to_string()
        }
        Some(HoldReason::InsufficientCapacity) => {
            "takes the step the capacity gate refused".to_string()
        }
        Some(HoldReason::AwaitingApproval) if spec.paused => {
            "promotes once spec.paused is lifted (`kubectl concurrency resume`)".to_string()
        }
        Some(HoldReason::AwaitingApproval) => "promotes the candidate into the target".to_string(),
        _ if spec.paused => {
            "promotes when the last stage has passed and spec.paused is lifted".to_string()
        }
        _ => "promotes when the last stage has passed".to_string(),
    };
    if requested.approve {
        Answer::Asked(what)
    } else {
        Answer::Does(what)
    }
}

/// Abort rolls back from any phase before the promotion (`machine`): once Promoting the
/// target may already run the candidate's config.
fn abort(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
    requested: Requested,
) -> Answer {
    let phase = status.phase;
    if !matches!(
        phase,
        Phase::Pending | Phase::Selecting | Phase::Progressing | Phase::Paused
    ) {
        return Answer::Refused(match phase {
            Phase::Promoting => "is Promoting: too late to abort, the target may already run \
                                 the candidate config"
                .to_string(),
            Phase::RollingBack => "is already rolling back".to_string(),
            _ => format!("is {}: nothing to abort", phase.as_str()),
        });
    }
    if spec.abort || (requested.abort && !status.abort_annotation_consumed) {
        return Answer::Asked("rolls back".into());
    }
    // The annotation a retry spent is ignored until it is seen gone: set again before that,
    // it would be removed unheard.
    if status.abort_annotation_consumed {
        return Answer::Refused(still_removed("abort"));
    }
    Answer::Does("restores the baseline, then removes the candidate".into())
}

/// Retry runs a RolledBack experiment again from stage 1 (`retry`).
fn retry(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
    requested: Requested,
) -> Answer {
    if let Some(why) = retry_refusal(spec, status) {
        return Answer::Refused(why);
    }
    if status.retry_annotation_consumed {
        return Answer::Refused(still_removed("retry"));
    }
    if requested.retry {
        return Answer::Asked("starts again".into());
    }
    Answer::Does("starts again from stage 1".into())
}

/// A one-shot annotation the operator spent and has not seen removed yet: set again now, it
/// would be taken for the spent one.
fn still_removed(what: &str) -> String {
    format!(
        "the previous {what} is still being removed by the operator; try again in a few seconds"
    )
}

/// Why a retry would be refused as the experiment stands (`retry::handle` says the same in
/// its Event); the other experiment on the target is the operator's to see.
pub(super) fn retry_refusal(
    spec: &ConcurrencyExperimentSpec,
    status: &ConcurrencyExperimentStatus,
) -> Option<String> {
    match status.phase {
        Phase::RolledBack if spec.abort => Some(
            "spec.abort is true, so the retried experiment would roll back at once; set it to \
             false first"
                .into(),
        ),
        Phase::RolledBack => None,
        Phase::Succeeded => Some(format!(
            "the experiment succeeded, Deployment {} already runs {}; create a new experiment \
             to try another config",
            spec.target_ref.name,
            spec.walked_candidate(Some(status)).summary()
        )),
        Phase::Invalid => Some(
            "an Invalid experiment cannot run; fix the spec, then delete and re-create it".into(),
        ),
        _ => Some(format!(
            "the experiment is {} — only a RolledBack experiment is retried (abort to roll it \
             back, then retry once it is RolledBack)",
            where_(status)
        )),
    }
}

/// `spec.paused` holds a Pending or Progressing experiment (`progress`); a selection runs its
/// interval to the end, and a held one is already paused.
fn pause(spec: &ConcurrencyExperimentSpec, status: &ConcurrencyExperimentStatus) -> Answer {
    let phase = status.phase;
    if !matches!(phase, Phase::Pending | Phase::Progressing) {
        return Answer::Refused(match phase {
            Phase::Paused => match &status.hold_reason {
                Some(h) if !spec.paused => format!("is already Paused ({h})"),
                _ => "is already Paused".into(),
            },
            _ => format!(
                "is {}; only a Pending or Progressing experiment can be paused",
                phase.as_str()
            ),
        });
    }
    if spec.paused {
        return Answer::Asked("holds at this stage (spec.paused is true)".into());
    }
    Answer::Does("holds at this stage; analyses keep running and can still roll back".into())
}

/// Unpausing continues a running experiment; a hold needs approve, not resume (`pause::now`).
fn resume(spec: &ConcurrencyExperimentSpec, status: &ConcurrencyExperimentStatus) -> Answer {
    let phase = status.phase;
    if !spec.paused || phase.is_terminal() {
        return Answer::Refused(match (phase, &status.hold_reason) {
            (p, _) if p.is_terminal() => format!("is {}: nothing to resume", p.as_str()),
            (Phase::Paused, Some(h)) => format!(
                "is held ({h}), not paused by spec.paused; `kubectl concurrency approve` lifts \
                 the hold"
            ),
            _ => format!(
                "is {} and not paused (spec.paused is false)",
                where_(status)
            ),
        });
    }
    Answer::Does("continues".into())
}
