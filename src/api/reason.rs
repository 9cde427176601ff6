//! Why an experiment holds and why it decided: the closed sets of reasons the stage machine
//! writes into `status.holdReason` and `status.decision.reason` (and the Events and condition
//! reasons that go with them). The status fields stay strings, so an object written by any
//! operator version still reads; these enums are how code names a reason, and each is spelled
//! exactly as it always was in status, Events and docs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `status.holdReason`: what a `Paused` experiment waits for besides `spec.paused`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldReason {
    /// Inconclusive analyses exceed `inconclusiveLimit` with `onInconclusive: pause`.
    InconclusiveLimit,
    /// The capacity gate predicts the candidate cannot carry the next stage.
    InsufficientCapacity,
    /// All stages passed; a `manual` promotion waits for approval.
    AwaitingApproval,
    /// All stages passed; an `external` promotion waits for the target's template to carry
    /// the candidate config (`status.promotionPatch`, committed to Git).
    AwaitingExternalPromotion,
}

impl HoldReason {
    pub const ALL: [HoldReason; 4] = [
        HoldReason::InconclusiveLimit,
        HoldReason::InsufficientCapacity,
        HoldReason::AwaitingApproval,
        HoldReason::AwaitingExternalPromotion,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            HoldReason::InconclusiveLimit => "InconclusiveLimit",
            HoldReason::InsufficientCapacity => "InsufficientCapacity",
            HoldReason::AwaitingApproval => "AwaitingApproval",
            HoldReason::AwaitingExternalPromotion => "AwaitingExternalPromotion",
        }
    }

    /// The reason a stored `status.holdReason` names, `None` for one this version does not know.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// `status.decision.reason`: why the experiment promoted or rolled back.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecisionReason {
    /// Promote: every stage passed (automatic promotion).
    StagesPassed,
    /// Promote: a manual promotion was approved.
    Approved,
    /// Promote: with `promotion: external`, the target's template was changed (by Git) to
    /// carry the candidate config while held for it.
    PromotedExternally,
    /// Roll back: more failed analyses than `failureLimit`.
    CheckFailed,
    /// Roll back: more inconclusive analyses than `inconclusiveLimit`.
    InconclusiveLimit,
    /// Roll back: the candidate cannot carry the next stage.
    InsufficientCapacity,
    /// Roll back: a stage's split was not in force within `progressDeadline`.
    ProgressDeadlineExceeded,
    /// Roll back: abort requested.
    Aborted,
    /// Roll back: the spec became invalid mid-flight.
    InvalidSpec,
    /// Roll back: the target Deployment disappeared.
    TargetMissing,
    /// Roll back: someone else changed the target's pod template.
    TargetChanged,
    /// Roll back: an object by one of the experiment's names is not its own.
    NotOwned,
    /// Roll back: the experiment is being deleted.
    Deleted,
    /// Roll back: every candidate of a selection was eliminated.
    NoCandidatePassed,
    /// Roll back: every stage passed, but a check's `minImprovement` was not met.
    NotImproved,
}

impl DecisionReason {
    pub const ALL: [DecisionReason; 15] = [
        DecisionReason::StagesPassed,
        DecisionReason::Approved,
        DecisionReason::PromotedExternally,
        DecisionReason::CheckFailed,
        DecisionReason::InconclusiveLimit,
        DecisionReason::InsufficientCapacity,
        DecisionReason::ProgressDeadlineExceeded,
        DecisionReason::Aborted,
        DecisionReason::InvalidSpec,
        DecisionReason::TargetMissing,
        DecisionReason::TargetChanged,
        DecisionReason::NotOwned,
        DecisionReason::Deleted,
        DecisionReason::NoCandidatePassed,
        DecisionReason::NotImproved,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionReason::StagesPassed => "StagesPassed",
            DecisionReason::Approved => "Approved",
            DecisionReason::PromotedExternally => "PromotedExternally",
            DecisionReason::CheckFailed => "CheckFailed",
            DecisionReason::InconclusiveLimit => "InconclusiveLimit",
            DecisionReason::InsufficientCapacity => "InsufficientCapacity",
            DecisionReason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            DecisionReason::Aborted => "Aborted",
            DecisionReason::InvalidSpec => "InvalidSpec",
            DecisionReason::TargetMissing => "TargetMissing",
            DecisionReason::TargetChanged => "TargetChanged",
            DecisionReason::NotOwned => "NotOwned",
            DecisionReason::Deleted => "Deleted",
            DecisionReason::NoCandidatePassed => "NoCandidatePassed",
            DecisionReason::NotImproved => "NotImproved",
        }
    }

    /// The reason a stored `status.decision.reason` names, `None` for one this version does not
    /// know.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for HoldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for DecisionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no known reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason {0:?}")]
pub struct UnknownReason(pub String);

impl FromStr for HoldReason {
    type Err = UnknownReason;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownReason(s.to_string()))
    }
}

impl FromStr for DecisionReason {
    type Err = UnknownReason;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownReason(s.to_string()))
    }
}

/// The `reason` of every Event the stage machine writes: the one vocabulary `plan` emits,
/// `notify` matches and people read in `kubectl describe`. A hold or a decision is told under
/// its own reason (`Hold`, `Decision`), spelled as in status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventReason {
    /// Stage 1 began: the candidate gets traffic.
    Started,
    StageAdvanced,
    /// The spec was edited mid-flight (restart at stage 1, or the new spec taken over).
    SpecChanged,
    /// Promotion decided; the target is being given the candidate config.
    Promoting,
    Succeeded,
    RolledBack,
    /// The rollback could not put the target's replicas back as they were.
    BaselineNotRestored,
    AnalysisFailed,
    AnalysisInconclusive,
    /// No check had data for several analyses.
    NoData,
    /// The replicas cannot make the planned split exactly.
    CoarseSplit,
    /// The capacity gate cannot judge this experiment and is off.
    CapacityGateOff,
    SelectionStarted,
    CandidateChosen,
    CandidateEliminated,
    /// Someone (an HPA, a person) scaled the target.
    TargetScaled,
    CandidateAutoscaled,
    StandbyReleased,
    CandidateUnready,
    HoldLifted,
    Resumed,
    PausedByUser,
    RetryRefused,
    Retried,
    /// The pre-flight lookup found a check's series never existed.
    SeriesMissing,
    /// The pre-flight lookup could not tell yet; the experiment starts anyway.
    SeriesNotChecked,
    /// At the target's measured request rate the stages cannot reach the data the checks need
    /// (`analysis::reach`); the experiment starts anyway.
    TooFewRequests,
    /// The target's queue times come from a one-second clock (`analysis::queue_header`); the
    /// experiment starts anyway.
    QueueTimeCoarse,
    Invalid,
    Hold(HoldReason),
    Decision(DecisionReason),
}

impl EventReason {
    const PLAIN: [EventReason; 29] = [
        EventReason::Started,
        EventReason::StageAdvanced,
        EventReason::SpecChanged,
        EventReason::Promoting,
        EventReason::Succeeded,
        EventReason::RolledBack,
        EventReason::BaselineNotRestored,
        EventReason::AnalysisFailed,
        EventReason::AnalysisInconclusive,
        EventReason::NoData,
        EventReason::CoarseSplit,
        EventReason::CapacityGateOff,
        EventReason::SelectionStarted,
        EventReason::CandidateChosen,
        EventReason::CandidateEliminated,
        EventReason::TargetScaled,
        EventReason::CandidateAutoscaled,
        EventReason::StandbyReleased,
        EventReason::CandidateUnready,
        EventReason::HoldLifted,
        EventReason::Resumed,
        EventReason::PausedByUser,
        EventReason::RetryRefused,
        EventReason::Retried,
        EventReason::SeriesMissing,
        EventReason::SeriesNotChecked,
        EventReason::TooFewRequests,
        EventReason::QueueTimeCoarse,
        EventReason::Invalid,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            EventReason::Started => "Started",
            EventReason::StageAdvanced => "StageAdvanced",
            EventReason::SpecChanged => "SpecChanged",
            EventReason::Promoting => "Promoting",
            EventReason::Succeeded => "Succeeded",
            EventReason::RolledBack => "RolledBack",
            EventReason::BaselineNotRestored => "BaselineNotRestored",
            EventReason::AnalysisFailed => "AnalysisFailed",
            EventReason::AnalysisInconclusive => "AnalysisInconclusive",
            EventReason::NoData => "NoData",
            EventReason::CoarseSplit => "CoarseSplit",
            EventReason::CapacityGateOff => "CapacityGateOff",
            EventReason::SelectionStarted => "SelectionStarted",
            EventReason::CandidateChosen => "CandidateChosen",
            EventReason::CandidateEliminated => "CandidateEliminated",
            EventReason::TargetScaled => "TargetScaled",
            EventReason::CandidateAutoscaled => "CandidateAutoscaled",
            EventReason::StandbyReleased => "StandbyReleased",
            EventReason::CandidateUnready => "CandidateUnready",
            EventReason::HoldLifted => "HoldLifted",
            EventReason::Resumed => "Resumed",
            EventReason::PausedByUser => "PausedByUser",
            EventReason::RetryRefused => "RetryRefused",
            EventReason::Retried => "Retried",
            EventReason::SeriesMissing => "SeriesMissing",
            EventReason::SeriesNotChecked => "SeriesNotChecked",
            EventReason::TooFewRequests => "TooFewRequests",
            EventReason::QueueTimeCoarse => "QueueTimeCoarse",
            EventReason::Invalid => "Invalid",
            EventReason::Hold(h) => h.as_str(),
            EventReason::Decision(d) => d.as_str(),
        }
    }

    /// The reason an Event's text names (a hold before a decision of the same spelling:
    /// `InconclusiveLimit`, `InsufficientCapacity`); `None` for one this version never writes.
    pub fn parse(s: &str) -> Option<Self> {
        Self::PLAIN
            .into_iter()
            .chain(HoldReason::ALL.into_iter().map(EventReason::Hold))
            .chain(DecisionReason::ALL.into_iter().map(EventReason::Decision))
            .find(|r| r.as_str() == s)
    }
}

impl fmt::Display for EventReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for EventReason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for EventReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
