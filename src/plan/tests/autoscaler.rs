//! A HorizontalPodAutoscaler on the target: the split works around it — no tug of war over
//! `spec.replicas`, capacity follows its demand — and the target comes back sized for the load.

use super::*;
use crate::api::{DecisionAction, Phase};

fn hpa(min: i32, max: i32) -> Autoscaler {
    Autoscaler {
        name: "storefront".into(),
        min_replicas: min,
        max_replicas: max,
    }
}

/// A run of 3 pods whose HPA (min 2, max 10) sees a demand of 3.
fn autoscaled_run(extra: &str) -> Run {
    let mut run = Run::new(spec_with(extra), 3);
    run.world.autoscaler = Some(hpa(2, 10));
    run
}

fn replicas(run: &Run) -> (i32, i32) {
    let t = run
        .world
        .target
        .as_ref()
        .map_or(0, |t| t.deployment.replicas);
    let c = run.world.candidate.as_ref().map_or(0, |c| c.replicas);
    (t, c)
}

/// Ticks every 30 s with passing analyses until the run finishes, checking on the way that
/// the pods serving never drop below what the load needs.
fn run_to_end(run: &mut Run, verdict: Verdict) {
    run.tick(None);
    for _ in 0..400 {
        if run.status.phase.is_terminal() {
            return;
        }
        run.now += 30;
        run.tick(Some(verdict));
        let (t, c) = replicas(run);
        assert!(
            t + c >= run.world.demand,
            "{t} + {c} pods for a demand of {}",
            run.world.demand
        );
    }
    panic!("never finished: {:?}", run.status.message);
}

fn scale_targets(run: &Run) -> Vec<i32> {
    run.log
        .iter()
        .filter_map(|a| match a {
            Action::ScaleTarget { replicas } => Some(*replicas),
            _ => None,
        })
        .collect()
}

#[test]
fn below_100_the_target_is_left_to_its_hpa_and_the_candidate_comes_on_top() {
    let mut run = autoscaled_run("");
    run.tick(None);
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    // 30 %: the target keeps its 3 pods, the candidate gets 3 × 30/70 ≈ 1 on top.
    assert_eq!(replicas(&run), (3, 1));
    assert_eq!(run.status.planned_effective_weights, vec![25, 70, 100]);
    assert!(scale_targets(&run).is_empty(), "{:?}", run.log);
    // The load doubles: the HPA grows the target, the candidate follows its share.
    run.world.demand = 6;
    run.world.autoscale();
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    assert_eq!(replicas(&run), (6, 3));
    assert!(run.events().contains(&"TargetScaled".to_string()));
    assert_eq!(run.status.original.as_ref().unwrap().replicas, 6);
    let scaled =
        run.count(|a| matches!(a, Action::Event { reason, .. } if reason == "TargetScaled"));
    // Steady load: nothing more to say, nothing to write.
    run.log.clear();
    for _ in 0..5 {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    assert!(scale_targets(&run).is_empty());
    assert_eq!(scaled, 1);
}

#[test]
fn an_autoscaled_target_promotes_without_a_tug_of_war() {
    let mut run = autoscaled_run("");
    run_to_end(&mut run, Verdict::Pass);
    assert_eq!(
        run.status.phase,
        Phase::Succeeded,
        "{:?}",
        run.status.message
    );
    // The target was scaled by the operator only to hand over at 100 % and to come back.
    assert_eq!(scale_targets(&run), vec![0, 3]);
    assert_eq!(
        run.count(|a| matches!(a, Action::EnsureCandidateAutoscaler)),
        1
    );
    // No TargetScaled ping-pong: the HPA never had to undo anything.
    assert!(
        !run.events().contains(&"TargetScaled".to_string()),
        "{:?}",
        run.events()
    );
    assert_eq!(replicas(&run), (3, 0));
    assert!(
        !run.world.candidate_autoscaled,
        "the copy is removed with the candidate"
    );
}

#[test]
fn at_100_the_copy_follows_the_load_and_the_target_comes_back_that_big() {
    let mut run =
        autoscaled_run("stages: [{weight: 50, duration: 2m}, {weight: 100, duration: 10m}]\n");
    run.tick(None);
    while !(run.status.stage_index == Some(1) && run.world.candidate_autoscaled) {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(
            run.now < 3000,
            "never handed over: {:?}",
            run.status.message
        );
    }
    assert_eq!(replicas(&run), (0, 3));
    // Load rises at 100 %: the target's own HPA is idle at 0, the copy grows the candidate.
    run.world.demand = 8;
    run.world.autoscale();
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    assert_eq!(
        replicas(&run),
        (0, 8),
        "{:?}",
        run.last.as_ref().unwrap().actions
    );
    // Every pod the copy asked for counts: the experiment neither shrinks it nor regrows
    // the baseline while the new pods start.
    run.world.candidate.as_mut().unwrap().ready_replicas = 3;
    run.now += 30;
    let step = run.tick_with(Some(Verdict::Pass), |_| {}).clone();
    assert!(
        !step.actions.iter().any(|a| matches!(
            a,
            Action::ScaleTarget { .. } | Action::EnsureCandidate { .. }
        )),
        "{:?}",
        step.actions
    );
    run_to_end(&mut run, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(
        replicas(&run),
        (8, 0),
        "promoted at the size the load needs"
    );
}

#[test]
fn a_rollback_at_100_restores_the_target_sized_for_the_load() {
    let mut run = autoscaled_run("stages: [{weight: 100, duration: 10m}]\n");
    run.tick(None);
    while !run.world.candidate_autoscaled {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 3000);
    }
    run.world.demand = 5;
    run.world.autoscale();
    run_to_end(&mut run, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(
        run.status.decision.as_ref().map(|d| d.action),
        Some(DecisionAction::Rollback)
    );
    assert_eq!(replicas(&run), (5, 0));
    assert!(!run.world.candidate_autoscaled);
}

#[test]
fn a_candidate_pod_lost_at_100_is_covered_by_the_baseline() {
    let mut run = autoscaled_run("stages: [{weight: 100, duration: 10m}]\n");
    run.tick(None);
    while !run.world.candidate_autoscaled {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 3000);
    }
    run.auto_settle = false;
    run.world.candidate.as_mut().unwrap().ready_replicas = 2;
    run.now += 5;
    run.tick(None);
    assert_eq!(scale_targets(&run).last(), Some(&1), "{:?}", run.log);
}

#[test]
fn without_an_hpa_the_split_is_unchanged() {
    let mut run = Run::new(spec(), 3);
    run.tick(None);
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    assert_eq!(replicas(&run), (2, 1));
    assert!(run.count(|a| matches!(a, Action::EnsureCandidateAutoscaler)) == 0);
}
