//! A HorizontalPodAutoscaler on the target: the split works around it — no tug of war over
//! `spec.replicas`, capacity follows its demand — and the target comes back sized for the load.

use super::*;
use crate::api::{DecisionAction, Phase};
use crate::plan::AUTOSCALE_PERIOD;
use crate::workload::Need;

fn hpa(min: i32, max: i32) -> Autoscaler {
    Autoscaler {
        name: "storefront".into(),
        min_replicas: min,
        max_replicas: max,
        candidate_need: None,
    }
}

/// What the HPA's rule, applied to the candidate's pods by the shell, asks for.
fn candidate_needs(run: &mut Run, replicas: i32) {
    run.world.autoscaler.as_mut().unwrap().candidate_need = Some(Need {
        replicas,
        because: "cpu at 160 % of requests (target 100 %)".into(),
    });
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
    // No TargetScaled ping-pong: the HPA never had to undo anything.
    assert!(
        !run.events().contains(&"TargetScaled".to_string()),
        "{:?}",
        run.events()
    );
    assert_eq!(replicas(&run), (3, 0));
}

#[test]
fn at_100_the_candidate_follows_a_rise_by_the_hpa_s_rule_and_the_target_comes_back_at_it() {
    let mut run =
        autoscaled_run("stages: [{weight: 50, duration: 2m}, {weight: 100, duration: 10m}]\n");
    run.tick(None);
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    // The load rises at 50 %: the HPA grows the target, the candidate follows on top.
    run.world.demand = 5;
    run.world.autoscale();
    // Below 100 % the shell measures nothing for it (the target's HPA acts): no effect.
    candidate_needs(&mut run, 9);
    run.now += 30;
    run.tick(Some(Verdict::Pass));
    assert!(!run.events().contains(&"CandidateAutoscaled".to_string()));
    run.world.autoscaler.as_mut().unwrap().candidate_need = None;
    while run.status.stage_index != Some(1) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(
            run.now < 3000,
            "never reached 100 %: {:?}",
            run.status.message
        );
    }
    // The target's HPA is idle at 0; the candidate carries the size it last asked for, and
    // the candidate's load is looked at every HPA sync period.
    assert_eq!(replicas(&run), (0, 5));
    assert!(run.last.as_ref().unwrap().requeue_after <= Some(AUTOSCALE_PERIOD));
    // The load rises at 100 %: the HPA's rule on the candidate's pods asks for 8.
    run.world.demand = 8;
    run.world.autoscale();
    candidate_needs(&mut run, 8);
    // The new pods take a while to get ready (the real cluster's case: a plan that shrank
    // the candidate again until they were would churn pods every reconcile).
    run.auto_settle = false;
    for _ in 0..3 {
        run.now += 15;
        run.tick(Some(Verdict::Pass));
        let actions = &run.last.as_ref().unwrap().actions;
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::EnsureCandidate { replicas } if *replicas != 8)),
            "{actions:?}"
        );
        // No baseline pods for the 3 new ones: the 5 ready still carry the load, and a
        // target above 0 would wake its HPA. The size to restore rises as they get ready.
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::ScaleTarget { .. })),
            "{actions:?}"
        );
        assert_eq!(replicas(&run), (0, 8));
        assert_eq!(run.status.original.as_ref().unwrap().replicas, 5);
    }
    run.world.candidate.as_mut().unwrap().ready_replicas = 7;
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.original.as_ref().unwrap().replicas, 7);
    run.auto_settle = true;
    // That write lost (or the operator restarted before it landed): asked again, not said again.
    let c = run.world.candidate.as_mut().unwrap();
    (c.replicas, c.ready_replicas) = (5, 5);
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    let actions = &run.last.as_ref().unwrap().actions;
    assert!(
        actions.contains(&Action::EnsureCandidate { replicas: 8 }),
        "{actions:?}"
    );
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    assert_eq!(
        replicas(&run),
        (0, 8),
        "{:?}",
        run.last.as_ref().unwrap().actions
    );
    assert_eq!(run.status.original.as_ref().unwrap().replicas, 8);
    let said: Vec<String> = run
        .log
        .iter()
        .filter_map(|a| match a {
            Action::Event {
                reason, message, ..
            } if reason == "CandidateAutoscaled" => Some(message.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("HorizontalPodAutoscaler storefront")
            && said[0].contains("cpu at 160 % of requests")
            && said[0].contains("from 5 to 8"),
        "{said:?}"
    );
    // A fall is left to the HPA once the target is back: the candidate keeps 8.
    candidate_needs(&mut run, 2);
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    assert_eq!(replicas(&run), (0, 8));
    // More than the HPA allows is capped at its maxReplicas.
    candidate_needs(&mut run, 40);
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    run.now += 15;
    run.tick(Some(Verdict::Pass));
    assert_eq!(replicas(&run), (0, 10));
    run.world.autoscaler.as_mut().unwrap().candidate_need = None;
    while !run.status.phase.is_terminal() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 6000, "never finished: {:?}", run.status.message);
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    // The target comes back at the size the candidate had, then its HPA takes over.
    assert_eq!(
        scale_targets(&run).last(),
        Some(&10),
        "{:?}",
        scale_targets(&run)
    );
}

#[test]
fn a_rollback_at_100_restores_the_target_sized_as_the_hpa_last_had_it() {
    let mut run = autoscaled_run("stages: [{weight: 100, duration: 10m}]\n");
    run.world.demand = 5;
    run.world.autoscale();
    run_to_end(&mut run, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(
        run.status.decision.as_ref().map(|d| d.action),
        Some(DecisionAction::Rollback)
    );
    assert_eq!(replicas(&run), (5, 0));
}

#[test]
fn a_candidate_pod_lost_at_100_is_covered_by_the_baseline() {
    let mut run = autoscaled_run("stages: [{weight: 100, duration: 10m}]\n");
    run.tick(None);
    while run.world.target.as_ref().unwrap().deployment.replicas != 0 {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 3000);
    }
    run.log.clear();
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
}
