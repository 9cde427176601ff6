//! Notifications: which of the stage machine's decisions are told to people (`derive`), the
//! JSON bodies of the generic webhook and of a Slack-compatible incoming webhook (`payload`),
//! and the webhook's HMAC-SHA256 signature (`sign`) — all pure; and their delivery
//! (`deliver`: the queue, retries, reading URLs and keys from files), the only part with I/O.
//!
//! A notification is derived from the Events of the one reconcile whose status write recorded
//! the transition (see `derive`); docs/notifications.md has the payloads and the guarantees.

pub mod deliver;
mod derive;
mod payload;
mod sign;

use std::fmt;

use jiff::Timestamp;

pub use derive::derive;
pub use payload::{headline, slack_body, webhook_body, SlackOptions, PAYLOAD_VERSION};
pub use sign::{
    signature, timestamped_signature, SIGNATURE_HEADER, TIMESTAMPED_SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};

use crate::api::{CheckResult, Decision, Phase};

/// What happened, as named in `events:` (Helm) / `--notify-events` and in the payload's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The first stage was entered: at the start, after a retry, or restarted by an edit of
    /// `spec.candidate` (reason `SpecChanged`).
    Started,
    /// A stage passed and the next one was entered.
    StageAdvanced,
    /// All stages passed; a `manual` promotion waits for approval.
    AwaitingApproval,
    /// Held until approved: inconclusive analyses over `inconclusiveLimit` with
    /// `onInconclusive: pause`, or the capacity gate.
    Paused,
    /// The baseline serves all traffic again and the candidate is gone.
    RolledBack,
    /// The target runs the candidate config and the candidate is gone.
    Promoted,
    /// The experiment cannot run.
    Invalid,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Started,
        Kind::StageAdvanced,
        Kind::AwaitingApproval,
        Kind::Paused,
        Kind::RolledBack,
        Kind::Promoted,
        Kind::Invalid,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Started => "Started",
            Kind::StageAdvanced => "StageAdvanced",
            Kind::AwaitingApproval => "AwaitingApproval",
            Kind::Paused => "Paused",
            Kind::RolledBack => "RolledBack",
            Kind::Promoted => "Promoted",
            Kind::Invalid => "Invalid",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// Warning for what needs a person's attention.
    pub fn severity(self) -> Severity {
        match self {
            Kind::Started | Kind::StageAdvanced | Kind::Promoted => Severity::Info,
            Kind::AwaitingApproval | Kind::Paused | Kind::RolledBack | Kind::Invalid => {
                Severity::Warning
            }
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
}

impl Severity {
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
        }
    }
}

/// The kinds a deployment wants told; empty means every kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    kinds: Vec<Kind>,
}

/// A name in `--notify-events` that is not a kind.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown notification event {0:?}; known: Started, StageAdvanced, AwaitingApproval, Paused, RolledBack, Promoted, Invalid")]
pub struct UnknownKind(pub String);

impl Filter {
    /// From the names given (`StageAdvanced`, …); blank entries are ignored.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Filter, UnknownKind> {
        let kinds = names
            .iter()
            .map(|n| n.as_ref().trim())
            .filter(|n| !n.is_empty())
            .map(|n| Kind::parse(n).ok_or_else(|| UnknownKind(n.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Filter { kinds })
    }

    pub fn allows(&self, kind: Kind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }
}

/// The stage in force when the notification was derived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// 0-based index into `spec.stages`.
    pub index: i32,
    pub count: i32,
    pub planned_weight: i32,
    pub effective_weight: i32,
}

/// One thing to tell, with everything both payloads are built from.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// `<experiment uid>/<kind>/<stage index>/<time>`: the same for every delivery of one
    /// transition (the `X-Concurrency-Delivery` header), so a receiver can drop duplicates.
    pub id: String,
    pub kind: Kind,
    /// When the transition was decided (the time the status write recorded).
    pub at: Timestamp,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The target Deployment.
    pub target: String,
    pub phase: Phase,
    pub stage: Option<Stage>,
    /// `puma 2×6`, as read back from the target.
    pub baseline: Option<String>,
    /// `puma 2×4`.
    pub candidate: String,
    /// The CamelCase why: the Event reason, or the decision's reason for RolledBack/Promoted.
    pub reason: String,
    /// The stage machine's sentence (the Event's message).
    pub message: String,
    pub decision: Option<Decision>,
    /// The checks of the latest analysis that did not pass (RolledBack, Paused): values,
    /// limit and verdict as in `status.analyses`.
    pub checks: Vec<NotifiedCheck>,
}

/// A check as told: its record, and its values written for people in the check's unit.
#[derive(Clone, Debug, PartialEq)]
pub struct NotifiedCheck {
    pub result: CheckResult,
    /// `1.7ms`, `-` when not measured.
    pub baseline: String,
    pub candidate: String,
}

#[cfg(test)]
mod tests;
