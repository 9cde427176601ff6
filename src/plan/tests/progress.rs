//! Pending and Progressing: start, capacity order, the stage clock, advancing, pausing,
//! manual promotion, analyses and timing.

use super::*;
use crate::api::{OriginalState, Phase, Recommendation};

#[test]
fn pending_waits_for_a_missing_target() {
    let mut run = Run::new(spec(), 6);
    run.world.target = None;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Pending);
    assert!(out.actions.is_empty());
    assert_eq!(out.requeue_after, Some(TARGET_POLL));
    assert!(out.status.message.clone().unwrap().contains("storefront"));
    assert_eq!(
        condition(&out.status, "Progressing"),
        ("False".into(), "TargetNotFound".into())
    );
    assert_eq!(out.status.observed_generation, Some(1));
}

#[test]
fn pending_records_the_original_replicas_only_once() {
    let spec = spec();
    let mut world = World::new(Router::Replicas, 4);
    world.candidate = Some(DeploymentState {
        replicas: 2,
        ready_replicas: 2,
        rolled_out: true,
    });
    let status = ConcurrencyExperimentStatus {
        original: Some(OriginalState {
            replicas: 6,
            ..Default::default()
        }),
        ..Default::default()
    };
    let out = step(&spec, &status, &world.observe(at(0)));
    assert_eq!(out.status.original.unwrap().replicas, 6);
    assert_eq!(out.status.phase, Phase::Progressing);
    assert_eq!(out.status.stage_index, Some(0));
}

#[test]
fn the_candidate_grows_before_the_baseline_shrinks() {
    let mut run = Run::new(spec(), 6);
    run.auto_settle = false;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Progressing);
    assert_eq!(events(&out.actions), ["Started"]);
    assert!(out
        .actions
        .contains(&Action::EnsureCandidate { replicas: 2 }));
    assert!(!out
        .actions
        .iter()
        .any(|a| matches!(a, Action::ScaleTarget { .. })));
    assert_eq!(out.requeue_after, Some(POLL));
    // One candidate pod ready is not enough.
    run.world.candidate.as_mut().unwrap().ready_replicas = 1;
    run.now += 5;
    let out = run.tick(None).clone();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    run.world.settle();
    run.now += 5;
    let out = run.tick(None).clone();
    assert_eq!(out.actions, vec![Action::ScaleTarget { replicas: 4 }]);
    assert!(out.status.stage_started_at.is_none());
    // The split shows in the ready pods only after the scale-down took effect.
    run.world.settle();
    run.now += 5;
    let out = run.tick(None).clone();
    assert!(out.actions.is_empty());
    assert_eq!(out.status.stage_started_at, Some(Time(at(15))));
    assert_eq!(out.status.effective_weight, 33);
}

#[test]
fn the_stage_clock_waits_for_the_effective_weight() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.now += 5;
    run.tick(None); // scaled to 4 + 2 and settled
    run.now += 5;
    run.tick_with(None, |o| o.effective_weight = 20); // endpoints not updated yet
    assert!(run.status.stage_started_at.is_none());
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage_started_at, Some(Time(at(15))));
}

#[test]
fn a_stage_advances_only_after_its_duration_and_a_passed_analysis() {
    let mut run = in_stage_one();
    run.advance(60, 9, Verdict::Pass); // t = 550, duration 600 s not over
    assert_eq!(run.status.stage_index, Some(0));
    assert_eq!(run.status.stage_passed_analyses, 9);
    run.now = 610;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.status.stage.as_deref(), Some("2/3"));
    assert_eq!(run.status.planned_weight, 70);
    assert_eq!(run.status.stage_passed_analyses, 0);
    assert!(run.status.stage_started_at.is_none());
    assert_eq!(run.events(), ["StageAdvanced"]);
    assert!(run.log.contains(&Action::EnsureCandidate { replicas: 4 }));
}

#[test]
fn a_stage_without_analyses_does_not_advance() {
    let mut run = in_stage_one();
    run.now = 2000;
    run.tick(None);
    assert_eq!(run.status.stage_index, Some(0));
    assert!(analysis_due(&run.spec, &run.status, at(run.now)));
}

#[test]
fn the_latest_analysis_of_the_stage_must_have_passed() {
    let mut run = in_stage_one();
    run.advance(60, 9, Verdict::Pass);
    run.now = 610;
    run.tick(Some(Verdict::Inconclusive));
    assert_eq!(run.status.stage_index, Some(0));
    run.now = 670;
    run.tick(Some(Verdict::Fail)); // 1 failure tolerated
    assert_eq!(run.status.stage_index, Some(0));
    assert_eq!(run.status.phase, Phase::Progressing);
    run.now = 730;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.stage_index, Some(1));
}

#[test]
fn missing_data_never_promotes() {
    let spec = spec_with("stages: [{weight: 100, duration: 1m}]\n");
    let mut spec = spec;
    spec.analysis.inconclusive_limit = 100;
    let mut run = Run::new(spec, 2);
    run.tick(None);
    run.advance(60, 90, Verdict::Inconclusive);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert!(run.status.inconclusive_analyses > 80);
    assert_eq!(run.status.stage_passed_analyses, 0);
    assert_eq!(run.count(|a| *a == Action::PromoteTarget), 0);
}

#[test]
fn paused_by_user_holds_the_stage_and_resumes_where_it_was() {
    let mut run = in_stage_one();
    run.spec.paused = true;
    run.advance(60, 12, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.stage_index, Some(0));
    assert_eq!(
        run.status.stage_passed_analyses, 12,
        "analyses keep running while paused"
    );
    assert_eq!(run.events(), ["PausedByUser"]);
    assert_eq!(
        condition(&run.status, "Progressing"),
        ("False".into(), "PausedByUser".into())
    );
    assert!(run
        .status
        .message
        .clone()
        .unwrap()
        .starts_with("Paused (PausedByUser)"));
    run.spec.paused = false;
    run.now += 60;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.events(), ["PausedByUser", "Resumed", "StageAdvanced"]);
}

#[test]
fn manual_promotion_waits_for_approval() {
    let spec = spec_with(
        "promotion: manual\nstages: [{weight: 50, duration: 1m}, {weight: 100, duration: 1m}]\n",
    );
    let mut run = Run::new(spec, 2);
    run.tick(None);
    run.advance(60, 8, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.status.hold_reason.as_deref(), Some(AWAITING_APPROVAL));
    assert_eq!(condition(&run.status, "Progressing").1, "AwaitingApproval");
    assert_eq!(
        run.events()
            .iter()
            .filter(|e| *e == "AwaitingApproval")
            .count(),
        1
    );
    assert_eq!(run.count(|a| *a == Action::PromoteTarget), 0);
    // A failure still rolls back while waiting.
    let mut failing = Run {
        log: Vec::new(),
        last: None,
        ..Run::new(run.spec.clone(), 2)
    };
    failing.status = run.status.clone();
    failing.world = run.world.clone();
    failing.now = run.now;
    failing.advance(60, 2, Verdict::Fail);
    assert_eq!(failing.status.phase, Phase::RollingBack);
    // spec.approved promotes; there is no annotation to remove.
    run.now += 5;
    run.world.spec_approved = true;
    let out = run.tick(None).clone();
    assert_eq!(out.status.phase, Phase::Promoting);
    let decision = out.status.decision.unwrap();
    assert_eq!(decision.reason, "Approved");
    assert!(
        decision.message.contains("spec.approved"),
        "{}",
        decision.message
    );
    assert!(out.actions.contains(&Action::PromoteTarget));
    assert!(!out.actions.contains(&Action::ClearApproval));
    assert!(!out.status.approve_annotation_consumed);
}

#[test]
fn pausing_at_the_promotion_gate_is_reported_once() {
    let spec = spec_with(
        "promotion: manual\nstages: [{weight: 50, duration: 1m}, {weight: 100, duration: 1m}]\n",
    );
    let mut run = Run::new(spec, 2);
    run.tick(None);
    run.advance(60, 8, Verdict::Pass);
    assert_eq!(run.status.hold_reason.as_deref(), Some(AWAITING_APPROVAL));
    run.log.clear();
    // Every tick also replays itself: a repeated PausedByUser would fail there.
    run.spec.paused = true;
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(condition(&run.status, "Progressing").1, PAUSED_BY_USER);
    run.spec.paused = false;
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(condition(&run.status, "Progressing").1, AWAITING_APPROVAL);
    assert_eq!(run.events(), [PAUSED_BY_USER, AWAITING_APPROVAL]);
    assert_eq!(run.status.phase, Phase::Paused);
}

#[test]
fn analyses_are_recorded_once_and_truncated() {
    let mut run = in_stage_one();
    run.now = 70;
    let rec = record(Verdict::Pass, 70, 0, 33);
    let with = |o: &mut Observations| {
        o.analysis = Some(AnalysisOutcome {
            record: rec.clone(),
            recommendation: Some(Recommendation {
                io_ratio: 0.52,
                source: None,
                threads: 4,
                async_server_advised: false,
                async_workers_per_core: None,
                speedups: vec![1.0, 1.35],
                message: "4 threads".into(),
            }),
            no_data: false,
            queries: Default::default(),
        })
    };
    run.tick_with(None, with);
    run.tick_with(None, with); // the shell retried with the same result
    assert_eq!(run.status.analyses.len(), 1);
    assert_eq!(run.status.stage_passed_analyses, 1);
    assert_eq!(run.status.last_analysis_at, Some(Time(at(70))));
    assert_eq!(run.status.last_verdict, Some(Verdict::Pass));
    assert_eq!(run.status.recommendation.as_ref().unwrap().threads, 4);
    run.spec.stages[0].duration = "1h".into();
    run.advance(60, 14, Verdict::Pass);
    assert_eq!(run.status.analyses.len(), KEPT_ANALYSES);
    assert_eq!(run.status.analyses.last().unwrap().at, Time(at(run.now)));
    assert_eq!(run.status.stage_passed_analyses, 15);
}

#[test]
fn analysis_due_follows_the_stage_clock_and_the_last_analysis() {
    let spec = spec();
    let mut st = ConcurrencyExperimentStatus {
        phase: Phase::Pending,
        ..Default::default()
    };
    assert!(!analysis_due(&spec, &st, at(1000)));
    st.phase = Phase::Progressing;
    assert!(
        !analysis_due(&spec, &st, at(1000)),
        "split not in force yet"
    );
    st.stage_started_at = Some(Time(at(100)));
    assert!(!analysis_due(&spec, &st, at(159)));
    assert!(analysis_due(&spec, &st, at(160)));
    st.last_analysis_at = Some(Time(at(200)));
    assert!(!analysis_due(&spec, &st, at(259)));
    assert!(analysis_due(&spec, &st, at(260)));
    // An analysis of the previous stage does not delay the new one.
    st.last_analysis_at = Some(Time(at(50)));
    assert!(analysis_due(&spec, &st, at(160)));
    st.phase = Phase::Paused;
    assert!(analysis_due(&spec, &st, at(160)));
    for phase in [Phase::Promoting, Phase::RollingBack, Phase::Succeeded] {
        st.phase = phase;
        assert!(!analysis_due(&spec, &st, at(1000)), "{phase:?}");
    }
    let mut bad = spec.clone();
    bad.analysis.interval = "soon".into();
    st.phase = Phase::Progressing;
    assert!(!analysis_due(&bad, &st, at(1000)));
}

#[test]
fn requeue_is_the_sooner_of_the_next_analysis_and_the_stage_end() {
    let mut run = in_stage_one(); // started at 10, interval 60, duration 600
    run.now = 40;
    assert_eq!(secs(run.tick(None).requeue_after), 30);
    run.now = 70;
    assert_eq!(secs(run.tick(Some(Verdict::Pass)).requeue_after), 60);
    run.spec.stages[0].duration = "90s".into();
    run.now = 80;
    assert_eq!(secs(run.tick(None).requeue_after), 20);
}

#[test]
fn a_spec_that_lost_stages_continues_at_its_last_stage() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    while run.status.stage_index != Some(2) {
        run.advance(60, 1, Verdict::Pass);
        assert!(run.now < 5000);
    }
    run.spec.stages.truncate(2);
    run.spec.stages[1].weight = 100;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.status.stage.as_deref(), Some("2/2"));
    while !run.status.phase.is_terminal() && run.now < 10_000 {
        run.advance(60, 1, Verdict::Pass);
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
}
