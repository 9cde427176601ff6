//! "Better enough" (`minImprovement`): judged once every stage has passed, over the
//! experiment's intervals. The fixture's passing analyses measure latency 0.40 s against the
//! baseline's 0.41 s: 2.4 % better.

use super::*;
use crate::api::{DecisionAction, Phase, Promotion};

fn asking(share: &str, promotion: Promotion) -> Run {
    let mut s = spec();
    s.analysis.checks[0].min_improvement = Some(share.into());
    s.promotion = promotion;
    let mut run = Run::new(s, 6);
    run.tick(None);
    run
}

fn walk(run: &mut Run) {
    for _ in 0..200 {
        if run.status.phase.is_terminal() || run.status.hold_reason.is_some() {
            return;
        }
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
}

#[test]
fn not_better_enough_rolls_back_with_the_measured_difference() {
    let mut run = asking("30%", Promotion::Auto);
    walk(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(
        (d.action, d.reason.as_str()),
        (DecisionAction::Rollback, "NotImproved")
    );
    assert!(
        d.message.contains(
            "latency: candidate 400ms vs baseline 410ms (medians of 10 intervals), better by \
             2.4%: less than the required 30%"
        ),
        "{}",
        d.message
    );
    assert_eq!(run.count(|a| *a == Action::PromoteTarget), 0);
    assert!(!run.world.target.as_ref().unwrap().runs_candidate_config);
    assert!(run.status.improvement.is_some());
    // The rollback's own Event names the reason; no separate warning.
    let named = run.events().iter().filter(|e| *e == "NotImproved").count();
    assert_eq!(named, 1, "{:?}", run.events());
}

#[test]
fn better_enough_promotes_saying_by_how_much() {
    let mut run = asking("2%", Promotion::Auto);
    walk(&mut run);
    assert_eq!(run.status.phase, Phase::Succeeded);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, "StagesPassed");
    assert!(
        d.message.contains("better enough") && d.message.contains("at least the required 2%"),
        "{}",
        d.message
    );
}

#[test]
fn a_manual_promotion_holds_warned_once_and_a_person_may_still_approve() {
    let mut run = asking("30%", Promotion::Manual);
    walk(&mut run);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some("AwaitingApproval"));
    let msg = run.status.message.clone().unwrap_or_default();
    assert!(msg.contains("minImprovement: latency:"), "{msg}");
    run.advance(60, 3, Verdict::Pass);
    let warned = run.events().iter().filter(|e| *e == "NotImproved").count();
    assert_eq!(warned, 1, "{:?}", run.events());
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    run.advance(30, 20, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(run.status.decision.unwrap().reason, "Approved");
}
