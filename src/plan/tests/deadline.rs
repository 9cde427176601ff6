//! The progress deadline (a stage's split must be in force in time) and capacity when the
//! candidate loses pods after it was.

use super::rollback::in_stage_two;
use super::*;
use crate::api::Phase;
use std::time::Duration;

const CRASHING: &str =
    "pod storefront-candidate-7c9-x1y2z: container web waiting: CrashLoopBackOff (last \
     terminated: Error, exit code 1)";

/// Stage 1 asked for; the candidate's pods never get ready and say why.
fn stuck() -> Run {
    let mut run = Run::new(spec(), 6);
    run.auto_settle = false;
    run.world.candidate_problem = Some(CRASHING.into());
    run.tick(None);
    assert_eq!(run.status.stage_entered_at, Some(Time(at(0))));
    run
}

fn scales(run: &Run) -> Vec<i32> {
    run.log
        .iter()
        .filter_map(|a| match a {
            Action::ScaleTarget { replicas } => Some(*replicas),
            _ => None,
        })
        .collect()
}

/// Ticks every 5 s until `secs`.
fn wait_until(run: &mut Run, secs: i64) {
    while run.now < secs {
        run.now = (run.now + 5).min(secs);
        run.tick(None);
    }
}

#[test]
fn a_split_not_in_force_by_the_deadline_rolls_back_naming_the_pods() {
    let mut run = stuck();
    run.world.candidate.as_mut().unwrap().ready_replicas = 1;
    wait_until(&mut run, 599);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert!(run.status.decision.is_none());
    run.now = 600;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::RollingBack);
    let d = out.status.decision.clone().unwrap();
    assert_eq!(d.reason, PROGRESS_DEADLINE_EXCEEDED);
    for part in [
        "Stage 1/3",
        "(30%)",
        "progressDeadline 10m",
        "1 of 2 candidate pods ready",
        "6 of 6 baseline pods ready",
        CRASHING,
    ] {
        assert!(d.message.contains(part), "{part} missing in {}", d.message);
    }
    assert_eq!(events(&out.actions), [PROGRESS_DEADLINE_EXCEEDED]);
    // The baseline never shrank, so the candidate goes at once.
    assert!(out.actions.contains(&Action::RemoveCandidate));
    assert!(scales(&run).is_empty());
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(
        condition(&run.status, "RolledBack"),
        ("True".into(), PROGRESS_DEADLINE_EXCEEDED.into())
    );
}

#[test]
fn a_split_in_force_in_time_is_judged_by_the_analyses_not_the_deadline() {
    let mut run = stuck();
    wait_until(&mut run, 590);
    run.world.settle();
    // The target shrinks to 4 at 595; the split is in force at 600, just in time.
    wait_until(&mut run, 600);
    assert_eq!(run.status.stage_started_at, Some(Time(at(600))));
    run.auto_settle = true;
    run.advance(60, 10, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.stage_index, Some(1));
    // The next stage has its own deadline, from when it was entered.
    assert_eq!(run.status.stage_entered_at, Some(Time(at(1200))));
    assert!(run.status.decision.is_none());
}

#[test]
fn the_deadline_counts_per_stage_and_a_slow_later_stage_rolls_back() {
    let mut run = in_stage_two(spec());
    let entered = run.status.stage_entered_at.clone().unwrap();
    // Stage 3 is entered; its 6 candidate pods never all get ready.
    run.auto_settle = false;
    while run.status.stage_index != Some(2) {
        run.now += 60;
        run.tick(Some(Verdict::Pass));
        run.world.settle();
    }
    let third = run.status.stage_entered_at.clone().unwrap();
    assert!(third.0 > entered.0);
    run.world.candidate.as_mut().unwrap().ready_replicas = 5;
    let deadline = third.0.as_second() - t0().as_second() + 600;
    wait_until(&mut run, deadline - 1);
    assert_eq!(run.status.phase, Phase::Progressing);
    run.now = deadline;
    run.tick(None);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, PROGRESS_DEADLINE_EXCEEDED);
    assert!(d.message.contains("Stage 3/3"), "{}", d.message);
    assert!(d.message.contains("5 of 6 candidate pods"), "{}", d.message);
}

#[test]
fn a_restarted_operator_keeps_the_deadline_from_status() {
    let mut run = stuck();
    wait_until(&mut run, 300);
    // A fresh process reads the status back: the deadline is still 10m after the start.
    let json = serde_json::to_string(&run.status).unwrap();
    run.status = serde_json::from_str(&json).unwrap();
    assert_eq!(run.status.stage_entered_at, Some(Time(at(0))));
    wait_until(&mut run, 595);
    assert_eq!(run.status.phase, Phase::Progressing);
    wait_until(&mut run, 600);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn a_status_from_before_the_deadline_starts_counting_when_read() {
    let mut run = stuck();
    wait_until(&mut run, 300);
    run.status.stage_entered_at = None;
    run.now = 305;
    run.tick(None);
    assert_eq!(run.status.stage_entered_at, Some(Time(at(305))));
    wait_until(&mut run, 900);
    assert_eq!(run.status.phase, Phase::Progressing);
    wait_until(&mut run, 905);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn the_deadline_does_not_count_while_paused_and_restarts_on_resume() {
    let mut run = stuck();
    run.spec.paused = true;
    wait_until(&mut run, 1200);
    assert_eq!(run.status.phase, Phase::Paused);
    run.spec.paused = false;
    wait_until(&mut run, 1205);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.stage_entered_at, Some(Time(at(1205))));
    wait_until(&mut run, 1800);
    assert_eq!(run.status.phase, Phase::Progressing);
    wait_until(&mut run, 1805);
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn a_custom_deadline_is_used_and_a_bad_one_is_invalid() {
    let mut run = stuck();
    run.spec.progress_deadline = "2m".into();
    wait_until(&mut run, 115);
    assert_eq!(run.status.phase, Phase::Progressing);
    // Woken at the deadline itself, not at the next safety poll.
    assert_eq!(
        run.last.as_ref().unwrap().requeue_after,
        Some(Duration::from_secs(5))
    );
    wait_until(&mut run, 120);
    assert_eq!(run.status.phase, Phase::RollingBack);
    let msg = run.status.decision.clone().unwrap().message;
    assert!(msg.contains("progressDeadline 2m"), "{msg}");

    for (bad, why) in [("soon", "spec.progressDeadline"), ("0s", "longer than 0s")] {
        let mut run = Run::new(spec(), 6);
        run.spec.progress_deadline = bad.into();
        let out = run.tick(None).clone();
        assert_eq!(out.status.phase, Phase::Invalid, "{bad}");
        let msg = out.status.message.clone().unwrap();
        assert!(msg.contains(why), "{msg}");
    }
}

#[test]
fn a_gateway_route_not_shifted_in_time_rolls_back() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 4);
    run.tick(None);
    // The route never takes the new weights (say, the HTTPRoute is not accepted).
    for _ in 0..130 {
        run.now += 5;
        run.tick_with(None, |o| o.effective_weight = 0);
    }
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, PROGRESS_DEADLINE_EXCEEDED);
    assert!(d.message.contains("0% of traffic"), "{}", d.message);
}

#[test]
fn a_candidate_losing_pods_mid_stage_regrows_the_baseline_at_once() {
    let mut run = in_stage_two(spec()); // 2 baseline + 4 candidate, in force
    run.auto_settle = false;
    let started = run.status.stage_started_at.clone();
    let c = run.world.candidate.as_mut().unwrap();
    c.ready_replicas = 3;
    c.rolled_out = false;
    run.now += 5;
    let out = run.tick(None).clone();
    // The baseline first, then the Warning.
    assert_eq!(out.actions[0], Action::ScaleTarget { replicas: 3 });
    let Action::Event {
        reason, message, ..
    } = &out.actions[1]
    else {
        panic!("{:?}", out.actions)
    };
    assert_eq!(reason, "CandidateUnready");
    assert_eq!(
        message,
        "3 of 4 candidate pods ready at stage 2/3, 4 before: the candidate lost readiness with \
         67% of traffic. The baseline takes back their share; the stage does not end until they \
         are ready again."
    );
    // Still short: the same loss, said once; the stage does not end while short; the
    // analyses, not the loss, judge the candidate.
    for _ in 0..150 {
        run.now += 5;
        run.tick(None);
    }
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(
        run.events()
            .iter()
            .filter(|e| *e == "CandidateUnready")
            .count(),
        1
    );
    assert_eq!(run.status.failed_analyses, 0);
    assert_eq!(run.status.stage_index, Some(1), "not earned while short");
    assert_eq!(run.status.stage_started_at, started);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 3);
    // Two lost: up again, at once.
    run.world.candidate.as_mut().unwrap().ready_replicas = 2;
    run.now += 5;
    assert_eq!(
        run.tick(None).actions[0],
        Action::ScaleTarget { replicas: 4 }
    );
    // The candidate is whole again: the baseline shrinks back to the split.
    run.world.settle();
    run.now += 5;
    assert_eq!(
        run.tick(None).actions,
        [Action::ScaleTarget { replicas: 2 }]
    );
}

#[test]
fn a_candidate_scaled_down_by_the_experiment_is_no_loss() {
    let mut run = in_stage_two(spec());
    run.auto_settle = false;
    // Weights lowered in the spec: the candidate shrinks once its traffic is back.
    let c = run.world.candidate.as_mut().unwrap();
    c.replicas = 2;
    c.ready_replicas = 2;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.failed_analyses, 0);
}

#[test]
fn at_100_percent_a_lost_candidate_pod_brings_a_baseline_pod_back() {
    let mut run = in_stage_two(spec());
    while run.status.stage_index != Some(2) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    // One baseline pod stays as a standby until an analysis at 100% passed.
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 1);
    assert_eq!(run.status.effective_weight, 86);
    assert!(
        run.status
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with(
                "Stage 3/3 at 86% of traffic (6 candidate and 1 baseline pods ready; one \
                 baseline pod kept as a standby until an analysis at 100% passes); 0 passed \
                 analyses in this stage."
            ),
        "{:?}",
        run.status.message
    );
    while run.status.stage_passed_analyses == 0 {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
    }
    assert!(run.events().contains(&"StandbyReleased".to_string()));
    run.now += 5;
    run.tick(None);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 0);
    assert_eq!(run.status.effective_weight, 100);
    run.auto_settle = false;
    run.log.clear();
    run.world.candidate.as_mut().unwrap().ready_replicas = 5;
    run.now += 5;
    assert_eq!(
        run.tick(None).actions[0],
        Action::ScaleTarget { replicas: 1 }
    );
}

#[test]
fn gateway_pods_lost_at_100_percent_hand_their_share_to_the_waiting_baseline() {
    let spec = spec_with("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = Run::new(spec, 3);
    run.tick(None);
    while run.status.stage_index != Some(2) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 5000);
    }
    // The route sends everything to the candidate; the baseline keeps its 3 pods.
    assert_eq!(run.world.route_weight, 100);
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 3);
    run.auto_settle = false;
    run.log.clear();
    run.world.candidate.as_mut().unwrap().ready_replicas = 1;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(
        out.actions[0],
        Action::SetRouteWeights {
            candidate_weight: 33,
            fresh_baseline: 0,
        },
        "the one pod left keeps its third, the baseline takes the rest"
    );
    assert_eq!(events(&out.actions), ["CandidateUnready"]);
    // All gone: nothing on the candidate until its pods are back.
    run.world.candidate.as_mut().unwrap().ready_replicas = 0;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(
        out.actions[0],
        Action::SetRouteWeights {
            candidate_weight: 0,
            fresh_baseline: 0,
        }
    );
    // Back: the stage's weight again.
    run.world.candidate.as_mut().unwrap().ready_replicas = 3;
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(
        out.actions[0],
        Action::SetRouteWeights {
            candidate_weight: 100,
            fresh_baseline: 0,
        }
    );
}

#[test]
fn a_one_replica_target_keeps_its_pod_until_the_candidate_carried_the_last_stage() {
    let mut run = Run::new(spec(), 1);
    run.tick(None);
    while run.status.stage_index != Some(2) || run.status.stage_started_at.is_none() {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 5000);
    }
    let t = &run.world.target.as_ref().unwrap().deployment;
    assert_eq!((t.replicas, t.ready_replicas), (1, 1));
    assert_eq!(run.status.effective_weight, 50);
    // A failing analysis there rolls back with the baseline pod still serving.
    run.advance(60, 3, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert!(
        !run.log.contains(&Action::ScaleTarget { replicas: 0 }),
        "never at 0"
    );
}

#[test]
fn a_drain_delay_past_five_minutes_or_unparseable_is_invalid_naming_the_field() {
    for (bad, why) in [
        ("6m", "spec.traffic.drainDelay: 6m is longer than 300s"),
        ("soon", "spec.traffic.drainDelay"),
    ] {
        let mut run = Run::new(spec(), 6);
        run.spec.traffic.drain_delay = Some(bad.into());
        let out = run.tick(None).clone();
        assert_eq!(out.status.phase, Phase::Invalid, "{bad}");
        let msg = out.status.message.clone().unwrap();
        assert!(msg.contains(why), "{msg}");
    }
    let mut run = Run::new(spec(), 6);
    run.spec.traffic.drain_delay = Some("5m".into());
    assert_ne!(run.tick(None).status.phase, Phase::Invalid);
}
