//! Someone else changes the target mid-flight: its pod template (image, env, a container
//! renamed) or its replica count.

use super::*;
use crate::api::{DecisionAction, Phase};

/// The template after someone changed the image.
const IMAGE_EDITED: &str = "t=00000000000000b1,c=000000c1,i=000000i2,e=000000e1";
/// The template after someone renamed the app container (its image and env move with it).
const RENAMED: &str = "t=00000000000000b2,c=000000c2,i=000000i2,e=000000e2";

/// A run of `replicas` pods whose stage `index` has its split in force.
fn at_stage(spec: ConcurrencyExperimentSpec, replicas: i32, index: i32) -> Run {
    let mut run = Run::new(spec, replicas);
    run.tick(None);
    while run.status.stage_index != Some(index) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 5000, "never reached stage {index}");
    }
    run.log.clear();
    run
}

/// At the last stage, once an analysis there passed: the standby baseline pod is gone.
fn at_full_share(spec: ConcurrencyExperimentSpec, replicas: i32) -> Run {
    let mut run = at_stage(spec, replicas, 2);
    assert_eq!(target(&run), (1, 1), "a standby until an analysis passes");
    while run.status.stage_passed_analyses == 0 {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    run.now += 5;
    run.tick(None);
    run.log.clear();
    run
}

/// What the shell observes once the app container `web` was renamed: the Deployment is still
/// there, its server config cannot be read, and the spec names a container that is gone.
fn rename_container(run: &mut Run) {
    let t = run.world.target.as_mut().unwrap();
    t.baseline = None;
    t.template_hash = RENAMED.into();
    run.world.spec_error = Some(
        "spec.container: container \"web\" not found in Deployment storefront (containers: app)"
            .into(),
    );
}

/// Ticks with pods one tick slow to get ready until the experiment finishes.
fn finish(run: &mut Run) {
    run.auto_settle = false;
    for _ in 0..10 {
        if run.status.phase.is_terminal() {
            return;
        }
        run.now += 5;
        run.tick(None);
        run.world.settle();
    }
}

fn target(run: &Run) -> (i32, i32) {
    let t = &run.world.target.as_ref().unwrap().deployment;
    (t.replicas, t.ready_replicas)
}

fn assert_rolled_back_to(run: &Run, replicas: i32, reason: &str) {
    assert_eq!(
        run.status.phase,
        Phase::RolledBack,
        "{:?}",
        run.status.message
    );
    let d = run.status.decision.clone().unwrap();
    assert_eq!(
        (d.action, d.reason.as_str()),
        (DecisionAction::Rollback, reason)
    );
    assert_eq!(target(run), (replicas, replicas));
    assert!(run.world.candidate.is_none());
    let scale = run
        .log
        .iter()
        .position(|a| *a == Action::ScaleTarget { replicas })
        .expect("target restored");
    let remove = run
        .log
        .iter()
        .position(|a| *a == Action::RemoveCandidate)
        .expect("candidate removed");
    assert!(scale < remove, "{:?}", run.log);
}

#[test]
fn a_container_renamed_at_stage_two_rolls_back_to_the_original_replicas() {
    // 3 pods at 70%: 1 baseline + 2 candidate — the bug left the target at that 1.
    let mut run = at_stage(spec(), 3, 1);
    assert_eq!(target(&run), (1, 1));
    rename_container(&mut run);
    run.auto_settle = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    let d = out.status.decision.clone().unwrap();
    assert_eq!(
        d.reason, "TargetChanged",
        "not InvalidSpec nor TargetMissing"
    );
    assert!(
        d.message.contains("(container set changed)") && d.message.contains("to 3 replicas"),
        "{}",
        d.message
    );
    assert!(out.actions.contains(&Action::ScaleTarget { replicas: 3 }));
    assert!(!out.actions.contains(&Action::RemoveCandidate));
    assert_eq!(events(&out.actions), ["TargetChanged"]);
    // Status keeps the baseline's config as last read.
    assert_eq!(out.status.baseline.unwrap().summary, "puma 2×6");
    finish(&mut run);
    assert_rolled_back_to(&run, 3, "TargetChanged");
}

#[test]
fn a_container_renamed_at_100_percent_brings_the_target_back_from_zero() {
    let mut run = at_full_share(spec(), 3);
    assert_eq!(target(&run), (0, 0), "all traffic on the candidate");
    rename_container(&mut run);
    finish(&mut run);
    assert_rolled_back_to(&run, 3, "TargetChanged");
    assert!(!run.log.contains(&Action::PromoteTarget));
}

#[test]
fn an_image_changed_while_paused_rolls_back_naming_it() {
    let mut run = at_stage(spec(), 6, 1);
    run.spec.paused = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Paused);
    run.world.target.as_mut().unwrap().template_hash = IMAGE_EDITED.into();
    run.now += 5;
    run.tick(None);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, "TargetChanged");
    assert!(d.message.contains("(image changed)"), "{}", d.message);
    finish(&mut run);
    assert_rolled_back_to(&run, 6, "TargetChanged");
}

#[test]
fn the_template_is_recorded_at_the_start_and_an_unchanged_one_walks_on() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    let original = run.status.original.clone().unwrap();
    assert_eq!(original.template_hash.as_deref(), Some(TEMPLATE));
    // Our own promotion changes the template: that is no reason to roll back.
    run.auto_settle = true;
    for _ in 0..200 {
        if run.status.phase.is_terminal() {
            break;
        }
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(
        run.world.target.as_ref().unwrap().template_hash,
        TEMPLATE_PROMOTED
    );
}

#[test]
fn a_template_changed_before_the_promotion_was_written_is_not_promoted() {
    let mut run = Run::new(spec_with("stages: [{weight: 100, duration: 1m}]\n"), 3);
    run.tick(None);
    while run.status.phase != Phase::Promoting {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 1000);
    }
    // Our PromoteTarget lost the race (a conflict): the person's edit is what the target has.
    let t = run.world.target.as_mut().unwrap();
    t.runs_candidate_config = false;
    t.template_hash = IMAGE_EDITED.into();
    run.log.clear();
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    assert_eq!(out.status.decision.unwrap().reason, "TargetChanged");
    assert!(!out.actions.contains(&Action::PromoteTarget));
    finish(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(target(&run), (3, 3));
    assert!(run.world.candidate.is_none());
    assert!(!run.log.contains(&Action::PromoteTarget));
}

#[test]
fn an_edit_after_the_promotion_was_written_lets_it_finish() {
    let mut run = Run::new(spec_with("stages: [{weight: 100, duration: 1m}]\n"), 3);
    run.auto_settle = false;
    run.tick(None);
    while run.status.phase != Phase::Promoting {
        run.world.settle();
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 1000);
    }
    // The target carries the candidate config (ours), and someone bumps the image meanwhile.
    run.world.target.as_mut().unwrap().template_hash =
        "t=00000000000000c9,c=000000c1,i=000000i9,e=000000e2".into();
    finish(&mut run);
    assert_eq!(run.status.phase, Phase::Succeeded);
}

#[test]
fn an_experiment_started_without_a_fingerprint_records_one_then_watches_it() {
    let mut run = at_stage(spec(), 6, 1);
    run.status.original.as_mut().unwrap().template_hash = None;
    run.now += 5;
    run.tick(None);
    assert_eq!(
        run.status
            .original
            .as_ref()
            .unwrap()
            .template_hash
            .as_deref(),
        Some(TEMPLATE)
    );
    assert_eq!(run.status.phase, Phase::Progressing);
    run.world.target.as_mut().unwrap().template_hash = IMAGE_EDITED.into();
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.decision.unwrap().reason, "TargetChanged");
}

#[test]
fn gateway_rollback_on_a_template_change_restores_the_route_first() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = at_stage(spec, 6, 1);
    assert_eq!(run.world.route_weight, 70);
    // A rollout of the target: the baseline Service pins the old pods, which are going away.
    run.world.target.as_mut().unwrap().template_hash = IMAGE_EDITED.into();
    run.auto_settle = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.status.decision.unwrap().reason, "TargetChanged");
    let work: Vec<&Action> = out
        .actions
        .iter()
        .filter(|a| !matches!(a, Action::Event { .. }))
        .collect();
    assert_eq!(
        work,
        [&Action::RestoreRoute],
        "the route first, nothing re-pinned"
    );
    run.now += 10;
    assert_eq!(run.tick(None).actions, vec![Action::RemoveCandidate]);
    run.now += 5;
    assert_eq!(run.tick(None).status.phase, Phase::RolledBack);
    assert!(!run
        .log
        .iter()
        .any(|a| matches!(a, Action::SetRouteWeights { .. })));
}

fn scaled_by_someone(run: &mut Run, replicas: i32) {
    let t = &mut run.world.target.as_mut().unwrap().deployment;
    t.replicas = replicas;
    t.ready_replicas = replicas;
}

#[test]
fn a_person_scaling_the_target_sets_its_new_size_and_the_split_follows() {
    // Stage 1 of 6 pods: 4 baseline + 2 candidate.
    let mut run = at_stage(spec(), 6, 0);
    assert_eq!(target(&run), (4, 4));
    scaled_by_someone(&mut run, 9);
    run.auto_settle = false;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["TargetScaled"]);
    assert_eq!(out.status.original.as_ref().unwrap().replicas, 9);
    // 30% of 9: 3 candidate pods first; the baseline shrinks to 6 once they are ready.
    assert!(out
        .actions
        .contains(&Action::EnsureCandidate { replicas: 3 }));
    assert!(!out
        .actions
        .iter()
        .any(|a| matches!(a, Action::ScaleTarget { .. })));
    run.world.settle();
    run.now += 5;
    let out = run.tick(None).clone();
    assert!(out.actions.contains(&Action::ScaleTarget { replicas: 6 }));
    run.world.settle();
    run.now += 5;
    run.tick(None);
    assert_eq!(target(&run), (6, 6));
    assert_eq!(run.status.phase, Phase::Progressing);
    // A rollback restores the size the person asked for, not the one before.
    run.log.clear();
    run.now += 5;
    run.tick_with(None, |o| o.abort_requested = true);
    finish(&mut run);
    assert_rolled_back_to(&run, 9, "Aborted");
    assert_eq!(
        run.events().iter().filter(|e| *e == "TargetScaled").count(),
        0,
        "our own scaling back up is not a person's"
    );
}

#[test]
fn our_own_scaling_is_never_taken_for_a_person_even_when_a_write_fails() {
    let mut run = at_stage(spec(), 6, 0);
    // Advancing to 70%: the candidate grows to 4, then the baseline is asked to shrink 4 → 2.
    run.auto_settle = false;
    let mut failed_once = false;
    for _ in 0..100 {
        if run.status.stage_index == Some(1) && run.status.stage_started_at.is_some() {
            break;
        }
        let before = target(&run);
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        let asked_shrink = run
            .last
            .as_ref()
            .unwrap()
            .actions
            .contains(&Action::ScaleTarget { replicas: 2 });
        if asked_shrink && !failed_once {
            // The patch failed: the target keeps its 4.
            let t = &mut run.world.target.as_mut().unwrap().deployment;
            (t.replicas, t.ready_replicas) = before;
            failed_once = true;
        }
        run.world.settle();
    }
    assert!(failed_once);
    assert_eq!(target(&run), (2, 2));
    assert_eq!(run.status.original.as_ref().unwrap().replicas, 6);
    assert!(!run.events().contains(&"TargetScaled".to_string()));
}

#[test]
fn a_person_scaling_at_100_percent_is_what_the_promotion_restores() {
    let mut run = at_full_share(spec(), 6);
    assert_eq!(target(&run), (0, 0));
    scaled_by_someone(&mut run, 4);
    for _ in 0..200 {
        if run.status.phase.is_terminal() {
            break;
        }
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(target(&run), (4, 4));
    assert_eq!(
        run.events().first().map(String::as_str),
        Some("TargetScaled")
    );
    // 100% of 4: the candidate shrank to 4 and the target went back to 0 until promoted.
    assert!(run.log.contains(&Action::EnsureCandidate { replicas: 4 }));
}

#[test]
fn a_person_scaling_during_a_rollback_is_followed() {
    let mut run = at_stage(spec(), 6, 1);
    run.auto_settle = false;
    run.now += 5;
    run.tick_with(None, |o| o.abort_requested = true);
    assert!(run.log.contains(&Action::ScaleTarget { replicas: 6 }));
    // The person scales up while the baseline comes back.
    scaled_by_someone(&mut run, 8);
    run.world.target.as_mut().unwrap().deployment.ready_replicas = 5;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["TargetScaled"]);
    assert!(
        !out.actions.contains(&Action::RemoveCandidate),
        "5 of 8 ready: the candidate stays"
    );
    run.world.settle();
    finish(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(run.status.original.as_ref().unwrap().replicas, 8);
    assert_eq!(target(&run), (8, 8));
    let followed = run
        .log
        .iter()
        .position(|a| matches!(a, Action::Event { reason, .. } if reason == "TargetScaled"))
        .unwrap();
    assert!(
        !run.log[followed..].contains(&Action::ScaleTarget { replicas: 6 }),
        "never scaled back below the person's 8: {:?}",
        run.log
    );
}

#[test]
fn a_gateway_target_is_never_scaled_by_us_but_a_person_is_still_followed() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = at_stage(spec, 6, 1);
    assert_eq!(
        run.status.target_scale,
        Some(crate::api::TargetScale { from: 6, to: 6 })
    );
    scaled_by_someone(&mut run, 10);
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(events(&out.actions), ["TargetScaled"]);
    // 70% of 10 needs 7 candidate pods; the baseline keeps its 10.
    assert!(out
        .actions
        .contains(&Action::EnsureCandidate { replicas: 7 }));
    assert!(!out
        .actions
        .iter()
        .any(|a| matches!(a, Action::ScaleTarget { .. })));
}
