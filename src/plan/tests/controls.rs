//! The controls a person is offered (`plan::controls`, what the plugin and the dashboard ask)
//! against what the machine then does: in each state, a control said to act makes the next
//! step act on its request, and a refused one leaves the step unmoved by it.

use super::approval::{at_the_gate, held_inconclusive};
use super::retry::rolled_back;
use super::*;
use crate::api::reason::DecisionReason;
use crate::api::{ConcurrencyExperiment, Phase};
use crate::plan::controls::{answer, available, Answer, Control};

/// The experiment object the plugin would read in this state.
fn object(run: &Run) -> ConcurrencyExperiment {
    let mut exp = ConcurrencyExperiment::new("storefront-threads", run.spec.clone());
    exp.status = Some(run.status.clone());
    let mut annotations = std::collections::BTreeMap::new();
    for (on, key) in [
        (run.world.approve_annotation, crate::api::ANNOTATION_APPROVE),
        (run.world.abort_annotation, crate::api::ANNOTATION_ABORT),
        (run.world.retry_annotation, crate::api::ANNOTATION_RETRY),
    ] {
        if on {
            annotations.insert(key.to_string(), "true".to_string());
        }
    }
    exp.metadata.annotations = Some(annotations);
    exp
}

fn promoting() -> Run {
    let mut run = at_the_gate();
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Promoting);
    run.world.approve_annotation = false;
    run.log.clear();
    run
}

fn rolled_back_with_abort_on() -> Run {
    let mut run = rolled_back();
    run.spec.abort = true;
    run
}

fn pending() -> Run {
    Run::new(spec(), 6)
}

/// Every state a person meets, by name.
fn states() -> Vec<(&'static str, Run)> {
    vec![
        ("pending", pending()),
        ("stage 1", in_stage_one()),
        ("held inconclusive", held_inconclusive()),
        ("at the gate", at_the_gate()),
        ("promoting", promoting()),
        ("rolled back", rolled_back()),
        ("rolled back, spec.abort", rolled_back_with_abort_on()),
    ]
}

/// The control's request as the machine sees it, then one step.
fn request(mut run: Run, control: Control) -> Step {
    match control {
        Control::Approve => run.world.approve_annotation = true,
        Control::Abort => run.world.abort_annotation = true,
        Control::Retry => run.world.retry_annotation = true,
        Control::Pause => run.spec.paused = true,
        Control::Resume => run.spec.paused = false,
    }
    run.now += 5;
    run.tick(None).clone()
}

/// Whether the step acted on the control's request.
fn acted(before: &Run, control: Control, step: &Step) -> bool {
    let events = events(&step.actions);
    let has = |r: &str| events.iter().any(|e| e == r);
    match control {
        Control::Abort => {
            step.status
                .decision
                .as_ref()
                .is_some_and(|d| d.reason == DecisionReason::Aborted.as_str())
                && before.status.decision.is_none()
        }
        Control::Retry => has("Retried"),
        Control::Approve => {
            has("HoldLifted")
                || (step.status.phase == Phase::Promoting
                    && before.status.phase != Phase::Promoting)
        }
        Control::Pause | Control::Resume => unreachable!(),
    }
}

#[test]
fn a_control_offered_is_acted_on_and_a_refused_one_is_not() {
    for (name, run) in states() {
        for control in [Control::Abort, Control::Retry, Control::Approve] {
            let said = answer(control, &object(&run));
            let step = request(run.clone(), control);
            let did = acted(&run, control, &step);
            match &said {
                Answer::Does(_) => assert!(
                    did,
                    "{name}: {control:?} said {said:?}, the machine did not act: {:?}",
                    events(&step.actions)
                ),
                Answer::Refused(_) => assert!(
                    !did,
                    "{name}: {control:?} refused ({said:?}), the machine acted: {:?}",
                    events(&step.actions)
                ),
                Answer::Asked(_) => panic!("{name}: nothing was asked yet"),
            }
        }
    }
}

#[test]
fn what_each_state_offers() {
    let offered: Vec<(&str, Vec<&str>)> = states()
        .iter()
        .map(|(name, run)| {
            let verbs = available(&object(run))
                .into_iter()
                .map(Control::verb)
                .collect();
            (*name, verbs)
        })
        .collect();
    assert_eq!(
        offered,
        [
            ("pending", vec!["abort", "pause"]),
            ("stage 1", vec!["abort", "pause"]),
            ("held inconclusive", vec!["approve", "abort"]),
            ("at the gate", vec!["approve", "abort"]),
            ("promoting", vec![]),
            ("rolled back", vec!["retry"]),
            ("rolled back, spec.abort", vec![]),
        ]
    );
}

#[test]
fn a_request_already_on_the_object_is_not_asked_again_and_a_spent_one_waits() {
    let mut run = in_stage_one();
    run.world.abort_annotation = true;
    assert_eq!(
        answer(Control::Abort, &object(&run)),
        Answer::Asked("rolls back".into())
    );
    // An abort annotation a retry spent is being removed: set again now it would be unheard.
    run.status.abort_annotation_consumed = true;
    assert!(matches!(
        answer(Control::Abort, &object(&run)),
        Answer::Refused(why) if why.contains("still being removed")
    ));
    let mut gate = at_the_gate();
    gate.world.approve_annotation = true;
    assert!(matches!(
        answer(Control::Approve, &object(&gate)),
        Answer::Asked(what) if what == "promotes the candidate into the target"
    ));
}
