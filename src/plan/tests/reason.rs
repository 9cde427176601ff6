//! Hold and decision reasons are enums in code and the same strings as ever in status, Events
//! and docs.

use serde_json::Value;

use super::*;
use crate::api::reason::{DecisionReason, HoldReason};

/// The strings status carried before the enums, spelled out (an exhaustive match: a new
/// variant must say its string here).
fn old_hold(r: HoldReason) -> &'static str {
    match r {
        HoldReason::InconclusiveLimit => "InconclusiveLimit",
        HoldReason::InsufficientCapacity => "InsufficientCapacity",
        HoldReason::AwaitingApproval => "AwaitingApproval",
        HoldReason::AwaitingExternalPromotion => "AwaitingExternalPromotion",
    }
}

fn old_decision(r: DecisionReason) -> &'static str {
    match r {
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

#[test]
fn every_reason_round_trips_to_its_old_string() {
    for r in HoldReason::ALL {
        let old = old_hold(r);
        assert_eq!((r.as_str(), r.to_string()), (old, old.to_string()));
        assert_eq!(HoldReason::parse(old), Some(r));
        assert_eq!(old.parse::<HoldReason>(), Ok(r));
        assert_eq!(serde_json::to_value(r).unwrap(), Value::String(old.into()));
        assert_eq!(serde_json::from_value::<HoldReason>(old.into()).unwrap(), r);
    }
    for r in DecisionReason::ALL {
        let old = old_decision(r);
        assert_eq!((r.as_str(), r.to_string()), (old, old.to_string()));
        assert_eq!(DecisionReason::parse(old), Some(r));
        assert_eq!(old.parse::<DecisionReason>(), Ok(r));
        assert_eq!(serde_json::to_value(r).unwrap(), Value::String(old.into()));
        assert_eq!(
            serde_json::from_value::<DecisionReason>(old.into()).unwrap(),
            r
        );
    }
    // `ALL` lists every variant once.
    let holds: std::collections::BTreeSet<_> =
        HoldReason::ALL.iter().map(|r| old_hold(*r)).collect();
    assert_eq!(holds.len(), 4);
    let decisions: std::collections::BTreeSet<_> = DecisionReason::ALL
        .iter()
        .map(|r| old_decision(*r))
        .collect();
    assert_eq!(decisions.len(), 15);
    assert_eq!(HoldReason::parse("PausedByUser"), None);
    assert!("Promoted".parse::<DecisionReason>().is_err());
    // The names kubectl and the tests read status with.
    assert_eq!(
        [AWAITING_APPROVAL, INCONCLUSIVE_LIMIT, INSUFFICIENT_CAPACITY],
        [
            "AwaitingApproval",
            "InconclusiveLimit",
            "InsufficientCapacity"
        ]
    );
    assert_eq!(PROGRESS_DEADLINE_EXCEEDED, "ProgressDeadlineExceeded");
}

#[test]
fn the_machine_records_the_route_s_original_backend_refs_once() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 6);
    let refs = r#"[[{"name":"storefront","port":80}]]"#;
    run.tick_with(None, |o| o.route_backend_refs = Some(refs.into()));
    let original = run.status.original.clone().unwrap();
    assert_eq!(original.route_backend_refs.as_deref(), Some(refs));
    // Recorded once: neither a later report nor a split route (none reported) changes it.
    run.now += 10;
    run.tick_with(None, |o| o.route_backend_refs = Some("[null]".into()));
    run.now += 10;
    run.tick(None);
    let original = run.status.original.clone().unwrap();
    assert_eq!(original.route_backend_refs.as_deref(), Some(refs));
    assert!(run.log.contains(&Action::SetRouteWeights {
        fresh_baseline: 0,
        candidate_weight: 30
    }));
}

#[test]
fn every_event_reason_is_read_back_from_its_text_and_no_two_plain_ones_collide() {
    use crate::api::reason::EventReason;
    let plain = [
        "Started",
        "StageAdvanced",
        "SpecChanged",
        "Promoting",
        "Succeeded",
        "RolledBack",
        "BaselineNotRestored",
        "AnalysisFailed",
        "AnalysisInconclusive",
        "NoData",
        "CoarseSplit",
        "CapacityGateOff",
        "SelectionStarted",
        "CandidateChosen",
        "CandidateEliminated",
        "TargetScaled",
        "CandidateAutoscaled",
        "StandbyReleased",
        "CandidateUnready",
        "HoldLifted",
        "Resumed",
        "PausedByUser",
        "RetryRefused",
        "Retried",
        "SeriesMissing",
        "SeriesNotChecked",
        "TooFewRequests",
        "QueueTimeCoarse",
        "Invalid",
    ];
    for text in plain {
        let r = EventReason::parse(text).unwrap();
        assert_eq!(r.as_str(), text);
        assert!(!matches!(
            r,
            EventReason::Hold(_) | EventReason::Decision(_)
        ));
        // No plain reason is spelled as a hold or a decision: notify tells them apart.
        assert!(HoldReason::parse(text).is_none() && DecisionReason::parse(text).is_none());
    }
    // A hold is read back before the decision spelled the same.
    for h in HoldReason::ALL {
        assert_eq!(EventReason::parse(h.as_str()), Some(EventReason::Hold(h)));
    }
    for d in DecisionReason::ALL {
        let r = EventReason::parse(d.as_str()).unwrap();
        assert_eq!(r.as_str(), d.as_str());
    }
    assert_eq!(EventReason::parse("SomethingElse"), None);
}
