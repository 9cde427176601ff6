//! Objects in the way: named like the ones the experiment makes, but not made by it.

use super::*;
use crate::api::Phase;

fn no_work(actions: &[Action]) -> bool {
    actions.iter().all(|a| matches!(a, Action::Event { .. }))
}

#[test]
fn a_foreign_candidate_before_the_start_is_invalid_naming_it() {
    let mut run = Run::new(spec(), 6);
    run.world.not_ours = vec!["Deployment storefront-candidate".into()];
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Invalid);
    assert_eq!(
        out.status.message.as_deref(),
        Some(
            "The experiment cannot run: Deployment storefront-candidate exists and is not \
             managed by this experiment; rename or delete it."
        )
    );
    assert_eq!(events(&out.actions), ["Invalid"]);
    assert!(no_work(&out.actions), "{:?}", out.actions);
    assert_eq!(
        out.status.original, None,
        "nothing recorded, nothing to restore"
    );
    // Invalid is final: later steps, and deleting the experiment, touch nothing either.
    run.now += 60;
    assert!(run.tick(None).actions.is_empty());
    let out = run
        .tick_with(None, |o| o.deleting_since = Some(o.now))
        .clone();
    assert!(out.release_finalizer && out.actions.is_empty());
}

#[test]
fn several_objects_in_the_way_are_all_named() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 6);
    run.world.not_ours = vec![
        "Service storefront-baseline".into(),
        "Service storefront-candidate".into(),
    ];
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Invalid);
    let msg = out.status.message.unwrap();
    assert!(
        msg.contains(
            "Service storefront-baseline and Service storefront-candidate exist and are not \
             managed by this experiment; rename or delete them"
        ),
        "{msg}"
    );
}

#[test]
fn a_candidate_replaced_mid_flight_rolls_back_without_touching_it() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    while run.status.stage_index != Some(1) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 5000);
    }
    run.log.clear();
    // Someone deleted our candidate (its pods went with it) and made their own by that name.
    run.world.candidate = None;
    run.world.not_ours = vec!["Deployment storefront-candidate".into()];
    run.auto_settle = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    let d = out.status.decision.clone().unwrap();
    assert_eq!(d.reason, "NotOwned");
    assert!(
        d.message.contains(
            "Deployment storefront-candidate exists but is not managed by this experiment"
        ),
        "{}",
        d.message
    );
    assert!(out.actions.contains(&Action::ScaleTarget { replicas: 6 }));
    for _ in 0..5 {
        run.world.settle();
        run.now += 5;
        run.tick(None);
    }
    assert_eq!(run.status.phase, Phase::RolledBack);
    let t = &run.world.target.as_ref().unwrap().deployment;
    assert_eq!((t.replicas, t.ready_replicas), (6, 6));
    assert!(
        !run.log
            .iter()
            .any(|a| matches!(a, Action::RemoveCandidate | Action::EnsureCandidate { .. })),
        "{:?}",
        run.log
    );
}
