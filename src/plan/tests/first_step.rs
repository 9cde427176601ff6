//! The capacity gate for the step out of a selection into stage 1: predicted from the
//! winner's analyses in the selection, with the split stage 1 really gives.

use super::selection_world::*;
use super::*;
use crate::api::reason::DecisionReason;
use crate::api::Phase;

/// The whole selection on a 6-pod target, every candidate passing with these memories (MiB:
/// Puma 1×1, 2×4, 2×3), each record changed by `edit`.
fn selected(memory: [f64; 3], edit: impl Fn(&mut AnalysisRecord)) -> Sel {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let per = memory.map(|m| (Verdict::Pass, m));
    for _ in 0..21 {
        s.interval_with(60, &per, &edit);
    }
    s
}

/// `requests` per candidate per 60 s interval at 10 % (so the Service serves requests / 60 ×
/// 10 req/s); memory picks puma 2×3 (2 × 3 / 62 ms = 96.8 req/s per pod).
fn chosen_at(requests: f64) -> Sel {
    selected([190.0, 185.0, 180.0], |r| {
        r.candidate_requests = Some(requests)
    })
}

#[test]
fn a_winner_that_carries_stage_one_walks_it_and_status_says_the_prediction() {
    // 600 per minute at 10 %: 100 req/s in all; stage 1 gives 2 of 7 pods (28 %): 14 req/s
    // per pod, 14 % of 96.8.
    let s = chosen_at(600.0);
    assert_eq!(s.run.status.phase, Phase::Progressing);
    assert_eq!(s.selection().winner, Some(2));
    let gate = s
        .run
        .status
        .capacity_gate
        .clone()
        .expect("a prediction for stage 1");
    assert_eq!(
        (gate.stage_index, gate.verdict),
        (0, Verdict::Pass),
        "{gate:?}"
    );
    assert_eq!(gate.candidate_pods, 2);
    let predicted = gate.predicted_utilization.unwrap();
    assert!(
        (predicted - 0.1446).abs() < 0.01,
        "{predicted}: {}",
        gate.message
    );
    assert!(gate.total_rate.is_some_and(|r| (r - 100.0).abs() < 1e-9));
    assert!(
        gate.message
            .starts_with("Stage 1/3 would give the candidate"),
        "{}",
        gate.message
    );
}

#[test]
fn without_the_winners_measurements_stage_one_starts_and_the_gate_says_why() {
    let s = selected([190.0, 185.0, 180.0], |r| r.capacity = None);
    assert_eq!(s.run.status.phase, Phase::Progressing);
    let gate = s.run.status.capacity_gate.clone().unwrap();
    assert_eq!(gate.verdict, Verdict::Inconclusive);
    assert!(
        gate.message
            .contains("Prometheus had no CPU time per request")
            && gate.message.contains("for the candidate in the selection"),
        "{}",
        gate.message
    );
}

/// 1×1 holds the least memory but, at the load measured, could not carry the rollout: it
/// does not win, and the ranking and the message say why with the numbers.
#[test]
fn the_least_memory_does_not_win_when_it_could_not_carry_the_rollout() {
    // 1200 per minute at 10 %: 200 req/s in all. Puma 1×1 at 62 ms carries 16 req/s per
    // pod: already 2 of 7 pods at stage 1 is 28 req/s each. Puma 2×3 (96.8) carries 100 %
    // (200 / 6 = 33 req/s per pod, 34 %).
    let s = selected([80.0, 190.0, 180.0], |r| {
        r.candidate_requests = Some(1200.0)
    });
    assert_eq!(s.run.status.phase, Phase::Progressing);
    let sel = s.selection();
    assert_eq!(sel.winner, Some(2), "{:?}", sel.message);
    let order: Vec<(&str, Verdict)> = sel
        .ranking
        .iter()
        .map(|r| (r.summary.as_str(), r.verdict))
        .collect();
    assert_eq!(
        order,
        [
            ("puma 2×3", Verdict::Pass),
            ("puma 2×4", Verdict::Pass),
            ("puma 1×1", Verdict::Fail)
        ]
    );
    let reason = sel.ranking[2].reason.clone().unwrap();
    assert!(
        reason.starts_with("cannot carry the rollout: Stage 1/3 would give"),
        "{reason}"
    );
    let msg = sel.message.clone().unwrap();
    assert!(msg.starts_with("Chose puma 2×3 (memory 180 MiB)"), "{msg}");
    assert!(
        msg.contains("Left out puma 1×1 (80 MiB): Stage 1/3 would give"),
        "{msg}"
    );
}

#[test]
fn no_survivor_that_could_carry_the_rollout_rolls_back_for_capacity() {
    // 12000 per minute at 10 %: 2000 req/s, more than any of the three could carry.
    let s = selected([80.0, 190.0, 180.0], |r| {
        r.candidate_requests = Some(12000.0)
    });
    let d = s.run.status.decision.clone().unwrap();
    assert_eq!(d.reason, DecisionReason::InsufficientCapacity.as_str());
    assert!(
        d.message.starts_with(
            "No candidate can carry the rollout at the load the selection measured. Left out puma"
        ) && d.message.ends_with("> 85%. Restoring the baseline."),
        "{}",
        d.message
    );
    assert_eq!(
        s.run.count(|a| matches!(a, Action::EnsureCandidate { .. })),
        0
    );
}
