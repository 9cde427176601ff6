//! The selection machine (docs/selection.md): elimination, the choice by objective, ties, no
//! survivor, restart-resume in `Selecting`, and capacity never below the baseline's.

use super::selection_world::*;
use super::*;
use crate::api::reason::DecisionReason;
use crate::api::{Phase, VariantCapacity};

#[test]
fn a_failing_candidate_is_eliminated_alone_and_the_objective_picks_among_the_rest() {
    let mut s = Sel::new(selection_spec(""), 6);
    let first = s.tick(None);
    assert_eq!(s.run.status.phase, Phase::Selecting);
    assert_eq!(reasons(&first), ["SelectionStarted"]);
    // 3 candidates + the fresh baseline on a 6-pod target: one pod each, 10 % each.
    s.tick(None);
    assert!(s
        .variants
        .iter()
        .chain([&s.fresh])
        .all(|v| v.as_ref().unwrap().replicas == 1));
    let obs = s.observe(None);
    assert!(obs.candidates.iter().all(|v| v.share == 10), "{obs:?}");
    // The shell's clock for the selection's analyses runs from the shares in force.
    let minute = std::time::Duration::from_secs(60);
    assert_eq!(next_analysis_at(&s.run.status, minute), Some(at(60)));
    // Puma 1×1 fails queue time twice (failureLimit 1): eliminated, the others go on.
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 190.0),
        (Verdict::Pass, 180.0),
    ];
    s.interval(60, &per);
    assert!(s.selection().variants[0].eliminated.is_none());
    let out = s.interval(60, &per);
    assert_eq!(reasons(&out), [CANDIDATE_ELIMINATED]);
    let gone = s.selection().variants[0].eliminated.clone().unwrap();
    assert_eq!(gone.checks, ["latency"]);
    assert!(
        gone.message.contains("puma 1×1") && gone.message.contains("0.62"),
        "{}",
        gone.message
    );
    assert!(out
        .actions
        .contains(&Action::Selection(SelectionAction::RemoveVariant {
            index: 0
        })));
    assert!(s.variants[0].is_none());
    assert_eq!(s.run.status.phase, Phase::Selecting);
    // Until the duration is over, analyses go on; then memory picks 2×3 (180 MiB) over 2×4.
    for _ in 0..18 {
        s.interval(60, &per);
    }
    assert_eq!(s.run.status.phase, Phase::Progressing);
    let sel = s.selection();
    assert_eq!(sel.winner, Some(2));
    let ranks: Vec<_> = sel
        .ranking
        .iter()
        .map(|r| (r.summary.as_str(), r.verdict))
        .collect();
    assert_eq!(
        ranks,
        [
            ("puma 2×3", Verdict::Pass),
            ("puma 2×4", Verdict::Pass),
            ("puma 1×1", Verdict::Fail)
        ]
    );
    let msg = sel.message.clone().unwrap();
    assert!(
        msg.starts_with(
            "Chose puma 2×3 (memory 180 MiB) over the runner-up puma 2×4 (190 MiB): 5.6% lower"
        ),
        "{msg}"
    );
    // The winner walks the stages as the single candidate; the variants are gone.
    assert_eq!(s.run.status.candidate.as_ref().unwrap().summary, "puma 2×3");
    assert_eq!(s.run.status.stage.as_deref(), Some("1/3"));
    assert!(s.run.events().contains(&CANDIDATE_CHOSEN.to_string()));
    assert!(s.variants.iter().all(Option::is_none));
    assert_eq!(
        s.run.count(|a| matches!(a, Action::EnsureCandidate { .. })),
        1
    );
}

#[test]
fn equal_objectives_go_to_fewer_workers_times_threads() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let per = [
        (Verdict::Pass, 185.0),
        (Verdict::Pass, 185.0),
        (Verdict::Pass, 185.0),
    ];
    for _ in 0..21 {
        s.interval(60, &per);
    }
    let sel = s.selection();
    // 1×1 (cost 1) is cheapest of the three at the same memory.
    assert_eq!(sel.winner, Some(0), "{:?}", sel.message);
    assert!(sel.message.as_ref().unwrap().contains("not significant"));
}

#[test]
fn a_difference_within_the_tolerance_goes_to_the_cheaper_config() {
    let mut s = Sel::new(selection_spec(", tolerance: '10%'"), 6);
    s.tick(None);
    s.tick(None);
    // 2×4 is 3 % lighter than 2×3: within 10 %, so 2×3 (6 threads against 8) wins.
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 180.0),
        (Verdict::Pass, 185.5),
    ];
    for _ in 0..21 {
        s.interval(60, &per);
    }
    let sel = s.selection();
    assert_eq!(sel.winner, Some(2));
    let msg = sel.message.as_ref().unwrap();
    assert!(
        msg.contains("Chose puma 2×3") && msg.contains("runner-up puma 2×4"),
        "{msg}"
    );
    assert!(msg.contains("not significant (tolerance 10.0%"), "{msg}");
}

#[test]
fn no_survivor_rolls_back_with_no_candidate_passed() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let per = [(Verdict::Fail, 150.0); 3];
    s.interval(60, &per);
    let out = s.interval(60, &per);
    assert_eq!(s.run.status.phase, Phase::RolledBack);
    let d = s.run.status.decision.clone().unwrap();
    assert_eq!(d.reason, DecisionReason::NoCandidatePassed.as_str());
    assert!(d.message.contains("puma 1×1 (latency)"), "{}", d.message);
    assert!(reasons(&out).contains(&"NoCandidatePassed".to_string()));
    assert_eq!(
        reasons(&out)
            .iter()
            .filter(|r| *r == CANDIDATE_ELIMINATED)
            .count(),
        3
    );
}

#[test]
fn a_restarted_operator_resumes_the_selection_from_status_alone() {
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 190.0),
        (Verdict::Pass, 180.0),
    ];
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    for _ in 0..5 {
        s.interval(60, &per);
    }
    // What the API server stored is all a new process has (every tick also replays).
    let stored = serde_json::to_string(&s.run.status).unwrap();
    s.run.status = serde_json::from_str(&stored).unwrap();
    let before = s.run.log.len();
    let again = s.tick(None);
    assert!(reasons(&again).is_empty(), "{:?}", again.actions);
    assert_eq!(s.selection().variants[0].failed_analyses, 2);
    assert_eq!(s.selection().variants[1].objective_samples.len(), 5);
    // An analysis already recorded, seen again after the restart, counts nothing.
    s.run.now -= 60;
    let replayed = s.interval(60, &per);
    assert!(reasons(&replayed).is_empty());
    assert_eq!(s.selection().variants[1].objective_samples.len(), 5);
    assert!(s.run.log[before..]
        .iter()
        .all(|a| !matches!(a, Action::Event { .. })));
    for _ in 0..16 {
        s.interval(60, &per);
    }
    assert_eq!(s.selection().winner, Some(2));
}

#[test]
fn low_signal_is_counted_and_require_signal_holds_the_choice() {
    let mut s = Sel::new(selection_spec(", requireSignal: true"), 6);
    s.run.measurement = None;
    s.tick(None);
    s.tick(None);
    let quiet = VariantCapacity {
        headroom: Some(0.9),
        ..Default::default()
    };
    for _ in 0..21 {
        s.run.now += 60;
        let candidates = (0..3)
            .map(|i| {
                let mut record = record(Verdict::Pass, s.run.now, 0, 10);
                record.capacity = Some(crate::api::CapacityMeasurement {
                    baseline: Some(quiet.clone()),
                    candidate: Some(quiet.clone()),
                    total_rate: Some(30.0),
                });
                CandidateAnalysis {
                    index: i,
                    outcome: AnalysisOutcome {
                        record,
                        recommendation: None,
                        no_data: false,
                        queries: Default::default(),
                    },
                    objective: Some((180.0 + i as f64) * MIB),
                }
            })
            .collect();
        let at = at(s.run.now);
        s.tick(Some(SelectionAnalysis {
            at,
            fresh_baseline_objective: Some(200.0 * MIB),
            candidates,
        }));
    }
    assert_eq!(s.run.status.phase, Phase::Selecting);
    assert_eq!(s.selection().low_signal_analyses, 21);
    assert!(s
        .run
        .status
        .message
        .as_ref()
        .unwrap()
        .contains("low signal"));
    assert_eq!(s.selection().variants[0].headroom, Some(0.9));
}

#[test]
fn the_gateway_router_moves_an_eliminated_candidates_weight_before_its_pods() {
    let mut spec = selection_spec("");
    spec.traffic = serde_yaml::from_str("{router: gatewayAPI, httpRoute: storefront}").unwrap();
    let mut s = Sel::new(spec, 2);
    s.tick(None);
    s.tick(None);
    assert_eq!((s.weights.clone(), s.fresh_weight), (vec![10, 10, 10], 10));
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 190.0),
        (Verdict::Pass, 180.0),
    ];
    s.interval(60, &per);
    let out = s.interval(60, &per);
    // Weights first (the Sel driver refuses to remove pods under a live weight)…
    assert!(out
        .actions
        .iter()
        .any(|a| matches!(a, Action::Selection(SelectionAction::SetWeights { .. }))));
    assert!(s.variants[0].is_some());
    assert_eq!(s.weights[0], 0);
    // …then the pods, once the Gateway has had scaleDownDelay to apply it.
    let held = s.tick(None);
    assert!(!held
        .actions
        .iter()
        .any(|a| matches!(a, Action::Selection(SelectionAction::RemoveVariant { .. }))));
    s.run.now += 10;
    let next = s.tick(None);
    assert!(next
        .actions
        .contains(&Action::Selection(SelectionAction::RemoveVariant {
            index: 0
        })));
}

#[test]
fn too_few_replicas_for_one_pod_per_variant_is_invalid() {
    let mut s = Sel::new(selection_spec(""), 1);
    s.tick(None);
    assert_eq!(s.run.status.phase, Phase::Invalid);
    let msg = s.run.status.message.clone().unwrap();
    assert!(msg.contains("at least 2 replicas"), "{msg}");
}

#[test]
fn abort_and_a_changed_target_roll_a_selection_back_and_remove_every_variant() {
    for change_target in [false, true] {
        let mut s = Sel::new(selection_spec(""), 6);
        s.tick(None);
        s.tick(None);
        let per = [(Verdict::Pass, 185.0); 3];
        s.interval(60, &per);
        if change_target {
            s.run.world.target.as_mut().unwrap().template_hash = TEMPLATE_PROMOTED.into();
        } else {
            s.abort = true;
        }
        let out = s.tick(None);
        let reason = s.run.status.decision.clone().unwrap().reason;
        let want = if change_target {
            "TargetChanged"
        } else {
            "Aborted"
        };
        assert_eq!(reason, want);
        assert_eq!(s.run.status.phase, Phase::RolledBack);
        let fresh_removed = Action::Selection(SelectionAction::RemoveFreshBaseline);
        assert!(out.actions.contains(&fresh_removed), "{:?}", out.actions);
        assert!(s.variants.iter().all(Option::is_none) && s.fresh.is_none());
    }
}

#[test]
fn a_custom_winner_is_told_to_have_no_capacity_gate() {
    let mut spec = selection_spec("");
    spec.candidates.as_mut().unwrap()[1] =
        serde_yaml::from_str("{server: custom, args: [serve]}").unwrap();
    let mut s = Sel::new(spec, 6);
    s.tick(None);
    s.tick(None);
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 170.0),
        (Verdict::Pass, 180.0),
    ];
    for _ in 0..22 {
        s.interval(60, &per);
    }
    assert_eq!(s.selection().winner, Some(1));
    let events = s.run.events();
    let chosen = events.iter().position(|e| e == CANDIDATE_CHOSEN).unwrap();
    assert_eq!(
        events[chosen + 1..chosen + 3],
        ["Started", CAPACITY_GATE_OFF]
    );
    // The candidate is sized with the fresh baseline's pod on top: 2 of 7 pods at 30 %, 5 of
    // 7 at 70 %.
    assert_eq!(s.run.status.planned_effective_weights, [29, 71, 100]);
}

#[test]
fn editing_the_candidates_mid_selection_restarts_it_with_a_fresh_history() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let per = [
        (Verdict::Fail, 150.0),
        (Verdict::Pass, 190.0),
        (Verdict::Pass, 180.0),
    ];
    s.interval(60, &per);
    s.interval(60, &per);
    assert!(s.selection().variants[0].eliminated.is_some());
    // The person drops puma 1×1 and tries falcon instead.
    s.run.spec.candidates.as_mut().unwrap()[0] =
        serde_yaml::from_str("{server: falcon, workers: 2}").unwrap();
    s.run.world.generation += 1;
    let out = s.tick(None);
    assert_eq!(reasons(&out), ["SpecChanged", "SelectionStarted"]);
    let sel = s.selection();
    assert!(sel
        .variants
        .iter()
        .all(|v| v.eliminated.is_none() && v.objective_samples.is_empty()));
    assert_eq!(sel.variants[0].summary, "falcon 2 workers");
    assert_eq!(s.run.status.phase, Phase::Selecting);
    assert!(
        s.variants[0].is_some(),
        "falcon is started in the eliminated one's place"
    );
}

/// Variants whose pods cannot start yet are waited for, not applied again every reconcile:
/// nothing to write while nothing changed (100 such selections re-applying their
/// Deployments cost 167 mCPU here).
#[test]
fn variants_not_ready_yet_are_waited_for_not_applied_again() {
    let mut s = Sel::new(selection_spec(""), 6);
    let first = s.tick(None);
    assert!(first
        .actions
        .iter()
        .any(|a| matches!(a, Action::Selection(SelectionAction::EnsureVariant { .. }))));
    // Applied, their pods pending.
    for v in s.variants.iter_mut().chain([&mut s.fresh]).flatten() {
        v.ready_replicas = 0;
        v.rolled_out = false;
    }
    let waiting = s.tick(None);
    assert_eq!(waiting.actions, [], "{:?}", waiting.actions);
    assert_eq!(s.run.status.phase, Phase::Selecting);
    assert_eq!(
        s.run.status.message.as_deref(),
        Some("Waiting for every variant's share to be in force.")
    );
    assert_eq!(waiting.requeue_after, Some(crate::plan::POLL));
    // Seven seconds before spec.progressDeadline (10m) the experiment is woken at it, not at
    // the next safety poll.
    let entered = s.run.status.stage_entered_at.clone().unwrap().0;
    s.run.now = entered.as_second() - at(0).as_second() + 600 - 7;
    let near = s.tick(None);
    assert_eq!(s.run.status.phase, Phase::Selecting);
    assert_eq!(near.requeue_after, Some(std::time::Duration::from_secs(7)));
}
