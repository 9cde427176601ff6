//! Approval: `spec.approved` approves the manual promotion only; the approve annotation is
//! one-shot — it approves the next hold of either kind and is removed.

use super::rollback::in_stage_two;
use super::*;
use crate::api::{InconclusiveAction, Phase};

/// Stage 2 held by four inconclusive analyses (limit 3, `onInconclusive: pause`).
pub(super) fn held_inconclusive() -> Run {
    let mut run = in_stage_two(spec());
    run.spec.analysis.on_inconclusive = InconclusiveAction::Pause;
    run.advance(60, 4, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    run.log.clear();
    run
}

fn manual() -> ConcurrencyExperimentSpec {
    spec_with(
        "promotion: manual\nstages: [{weight: 50, duration: 1m}, {weight: 100, duration: 1m}]\n",
    )
}

/// A manual promotion whose stages all passed, holding for approval.
pub(super) fn at_the_gate() -> Run {
    let mut run = Run::new(manual(), 2);
    run.tick(None);
    run.advance(60, 8, Verdict::Pass);
    assert_eq!(run.status.hold_reason.as_deref(), Some(AWAITING_APPROVAL));
    run.log.clear();
    run
}

/// Ticks until the promotion finished.
fn finish_promotion(run: &mut Run) {
    for _ in 0..10 {
        run.now += 5;
        run.tick(None);
        if run.status.phase == Phase::Succeeded {
            return;
        }
    }
    panic!("promotion did not finish: {:?}", run.status.message);
}

fn clears(run: &Run) -> usize {
    run.count(|a| *a == Action::ClearApproval)
}

#[test]
fn spec_approved_never_lifts_an_inconclusive_hold() {
    let mut run = held_inconclusive();
    run.world.spec_approved = true;
    run.advance(60, 5, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.status.inconclusive_analyses, 4);
    assert_eq!(clears(&run), 0);
    assert!(!run.events().contains(&"Resumed".to_string()));
}

#[test]
fn the_annotation_lifts_an_inconclusive_hold_once_and_is_removed() {
    let mut run = held_inconclusive();
    run.now += 5;
    run.world.approve_annotation = true;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert_eq!(out.status.hold_reason, None);
    assert_eq!(out.status.inconclusive_analyses, 0);
    assert!(out.status.approve_annotation_consumed);
    // The removal comes after everything that moves traffic.
    assert_eq!(out.actions.last(), Some(&Action::ClearApproval));
    assert_eq!(run.events(), ["HoldLifted", "Resumed"]);
    assert!(!run.world.approve_annotation, "the shell removed it");
    // Seen gone: nothing is left to remember.
    run.now += 5;
    run.tick(None);
    assert!(!run.status.approve_annotation_consumed);
    assert_eq!(clears(&run), 1);
    // The next hold needs a new approval.
    run.advance(60, 4, Verdict::Inconclusive);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
}

#[test]
fn a_lost_removal_does_not_approve_twice() {
    let mut run = held_inconclusive();
    run.now += 5;
    run.world.approve_annotation = true;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    // The removal keeps failing (or the operator restarts before it runs): the same annotation
    // is still there when the next hold comes, and must not lift it.
    for _ in 0..6 {
        run.world.approve_annotation = true;
        run.now += 60;
        run.tick(Some(Verdict::Inconclusive));
        let actions = &run.last.as_ref().unwrap().actions;
        assert_eq!(actions.last(), Some(&Action::ClearApproval), "asked again");
    }
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    assert!(run.status.approve_annotation_consumed);
    let lifted = |run: &Run| run.events().iter().filter(|e| *e == "HoldLifted").count();
    assert_eq!(lifted(&run), 1);
    // Once the removal went through, a new annotation is a new approval.
    run.now += 5;
    run.tick(None);
    assert!(!run.status.approve_annotation_consumed);
    assert_eq!(run.status.phase, Phase::Paused);
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(lifted(&run), 2);
}

#[test]
fn the_annotation_approves_a_manual_promotion_and_is_removed() {
    let mut run = at_the_gate();
    // spec.paused keeps the gate shut: the annotation waits, untouched.
    run.spec.paused = true;
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Paused);
    assert!(run.world.approve_annotation);
    assert_eq!(clears(&run), 0);
    run.spec.paused = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Promoting);
    let decision = out.status.decision.unwrap();
    assert_eq!(decision.reason, "Approved");
    assert!(
        decision
            .message
            .contains("annotation concurrency.dev/approve"),
        "{}",
        decision.message
    );
    assert!(out.actions.contains(&Action::PromoteTarget));
    assert_eq!(out.actions.last(), Some(&Action::ClearApproval));
    assert!(!run.world.approve_annotation);
    finish_promotion(&mut run);
    assert!(!run.status.approve_annotation_consumed);
    assert_eq!(clears(&run), 1);
}

#[test]
fn spec_approved_promotes_at_the_gate_without_holding() {
    let mut run = Run::new(manual(), 2);
    run.world.spec_approved = true;
    run.tick(None);
    run.advance(60, 8, Verdict::Pass);
    finish_promotion(&mut run);
    assert!(!run.events().contains(&AWAITING_APPROVAL.to_string()));
    let decision = run.status.decision.clone().unwrap();
    assert_eq!(decision.reason, "Approved");
    assert!(
        decision.message.contains("spec.approved"),
        "{}",
        decision.message
    );
    assert_eq!(clears(&run), 0);
}

#[test]
fn an_annotation_set_early_approves_the_first_hold() {
    let mut run = Run::new(manual(), 2);
    run.world.approve_annotation = true;
    run.tick(None);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(1), "still on the way");
    assert!(run.world.approve_annotation, "nothing held yet: kept");
    assert_eq!(clears(&run), 0);
    run.advance(60, 5, Verdict::Pass);
    finish_promotion(&mut run);
    assert!(!run.events().contains(&AWAITING_APPROVAL.to_string()));
    let decision = run.status.decision.clone().unwrap();
    assert!(
        decision
            .message
            .contains("annotation concurrency.dev/approve"),
        "{}",
        decision.message
    );
    assert!(!run.world.approve_annotation);
    assert_eq!(clears(&run), 1);
}

#[test]
fn an_annotation_with_nothing_to_approve_is_left_alone() {
    let mut run = Run::new(spec(), 6);
    run.world.approve_annotation = true;
    run.tick(None);
    for _ in 0..200 {
        run.now += 60;
        run.tick(Some(Verdict::Pass));
        if run.status.phase == Phase::Succeeded {
            break;
        }
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(run.status.decision.clone().unwrap().reason, "StagesPassed");
    assert!(run.world.approve_annotation);
    assert_eq!(clears(&run), 0);
}
