use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::api::{DecisionAction, Phase};
use crate::notify::{derive, Filter, Kind, Stage};
use crate::plan::{Action, EventType};

const ADVANCED: &str = "Advancing to stage 2/3: 70% of traffic to the candidate (puma 1×1).";

#[test]
fn a_stage_advance_is_told_with_its_stage_and_a_stable_id() {
    let st = status(Phase::Progressing, 1, 70, 33);
    let actions = [
        Action::EnsureCandidate { replicas: 4 },
        event(EventType::Normal, "StageAdvanced", ADVANCED),
    ];
    let got = derive(&experiment(), &st, &actions, now());
    assert_eq!(got.len(), 1);
    let n = &got[0];
    assert_eq!(n.kind, Kind::StageAdvanced);
    assert_eq!(n.id, format!("{UID}/StageAdvanced/1/2026-12-01T04:44:40Z"));
    assert_eq!(
        n.stage,
        Some(Stage {
            index: 1,
            count: 3,
            planned_weight: 70,
            effective_weight: 33
        })
    );
    assert_eq!(n.message, ADVANCED);
    assert_eq!(n.reason, "StageAdvanced");
    assert_eq!(n.baseline.as_deref(), Some("puma 2×6"));
    assert_eq!(n.candidate, "puma 1×1");
    assert_eq!(
        (n.namespace.as_str(), n.name.as_str()),
        ("shop", "storefront-threads")
    );
    assert!(n.checks.is_empty() && n.decision.is_none());
}

#[test]
fn a_rollback_carries_the_decision_and_the_failing_check_with_its_values_and_limit() {
    let actions = [event(EventType::Warning, "RolledBack", "Rolled back: …")];
    let got = derive(&experiment(), &rolled_back(), &actions, now());
    assert_eq!(got.len(), 1);
    let n = &got[0];
    assert_eq!(n.kind, Kind::RolledBack);
    assert_eq!(n.reason, "CheckFailed");
    let d = n.decision.as_ref().unwrap();
    assert_eq!(
        (d.action, d.message.as_str()),
        (DecisionAction::Rollback, ROLLBACK_MESSAGE)
    );
    // Only the check that did not pass, its numbers in the check's unit.
    assert_eq!(n.checks.len(), 1);
    let c = &n.checks[0];
    assert_eq!(c.result.name, "queueTime");
    assert_eq!(
        (c.result.baseline, c.result.candidate),
        (Some(0.0017), Some(0.4592))
    );
    assert_eq!(
        (c.baseline.as_str(), c.candidate.as_str()),
        ("1.7ms", "459.2ms")
    );
    assert_eq!(c.result.limit, "max 50ms");
}

#[test]
fn promotion_hold_pause_and_invalid_are_told() {
    let exp = experiment();
    let mut promoted = status(Phase::Succeeded, 2, 100, 100);
    promoted.decision = rolled_back().decision.map(|mut d| {
        d.action = DecisionAction::Promote;
        d.reason = "StagesPassed".into();
        d
    });
    let kinds = |st, reason: &str| -> Vec<(Kind, String)> {
        derive(&exp, &st, &[event(EventType::Normal, reason, "m")], now())
            .into_iter()
            .map(|n| (n.kind, n.reason))
            .collect()
    };
    assert_eq!(
        kinds(promoted, "Succeeded"),
        [(Kind::Promoted, "StagesPassed".into())]
    );
    let mut held = status(Phase::Paused, 2, 100, 100);
    held.hold_reason = Some("AwaitingApproval".into());
    assert_eq!(
        kinds(held, "AwaitingApproval"),
        [(Kind::AwaitingApproval, "AwaitingApproval".into())]
    );
    let mut paused = status(Phase::Paused, 1, 70, 67);
    paused.hold_reason = Some("InconclusiveLimit".into());
    assert_eq!(
        kinds(paused, "InconclusiveLimit"),
        [(Kind::Paused, "InconclusiveLimit".into())]
    );
    let mut gated = status(Phase::Paused, 1, 70, 67);
    gated.hold_reason = Some("InsufficientCapacity".into());
    assert_eq!(
        kinds(gated, "InsufficientCapacity"),
        [(Kind::Paused, "InsufficientCapacity".into())]
    );
    let invalid = crate::api::ConcurrencyExperimentStatus {
        phase: Phase::Invalid,
        ..Default::default()
    };
    assert_eq!(
        kinds(invalid.clone(), "Invalid"),
        [(Kind::Invalid, "Invalid".into())]
    );
    let n = derive(
        &exp,
        &invalid,
        &[event(EventType::Warning, "Invalid", "m")],
        now(),
    );
    assert_eq!(n[0].id, format!("{UID}/Invalid/-1/2026-12-01T04:44:40Z"));
    assert_eq!(
        kinds(status(Phase::Progressing, 0, 30, 0), "Started")[0].0,
        Kind::Started
    );
}

#[test]
fn a_rollback_decision_is_told_when_the_rollback_is_done_not_twice() {
    // `InconclusiveLimit` is also the Event of the rollback decision: not a pause then.
    let rolling = status(Phase::RollingBack, 1, 70, 67);
    let actions = [event(
        EventType::Warning,
        "InconclusiveLimit",
        "Rolling back: …",
    )];
    assert_eq!(derive(&experiment(), &rolling, &actions, now()), []);
}

#[test]
fn other_events_and_actions_are_not_told() {
    let st = status(Phase::Progressing, 1, 70, 67);
    let actions: Vec<Action> = [
        "AnalysisFailed",
        "AnalysisInconclusive",
        "NoData",
        "TargetScaled",
        "CoarseSplit",
        "Promoting",
        "HoldLifted",
        "Resumed",
        "PausedByUser",
        "Retried",
    ]
    .into_iter()
    .map(|r| event(EventType::Normal, r, "m"))
    .chain([Action::PromoteTarget, Action::RemoveCandidate])
    .collect();
    assert_eq!(derive(&experiment(), &st, &actions, now()), []);
}

#[test]
fn the_filter_keeps_the_kinds_named_and_everything_when_none_is() {
    let all = Filter::parse::<&str>(&[]).unwrap();
    assert!(Kind::ALL.into_iter().all(|k| all.allows(k)));
    assert_eq!(Filter::parse(&[""]).unwrap(), all, "the chart's empty list");
    let some = Filter::parse(&["RolledBack", " Promoted"]).unwrap();
    let allowed: Vec<Kind> = Kind::ALL.into_iter().filter(|k| some.allows(*k)).collect();
    assert_eq!(allowed, [Kind::RolledBack, Kind::Promoted]);
    let err = Filter::parse(&["Rollback"]).unwrap_err();
    assert_eq!(err.0, "Rollback");
    assert!(
        err.to_string().contains("known: Started, StageAdvanced"),
        "{err}"
    );
}
