//! `spec.candidate` edited mid-flight: a restart at stage 1 with a fresh history, the
//! candidate re-applied, and nothing measured on the old config counted for the new one.

use super::rollback::in_stage_two;
use super::*;
use crate::api::{InconclusiveAction, Phase};

fn three_threads(c: &mut crate::api::ServerConfig) {
    c.threads = Some(3);
}

/// In stage 2 with one failed and one passed analysis on record.
fn measured() -> Run {
    let mut run = in_stage_two(spec());
    run.advance(60, 1, Verdict::Fail);
    run.advance(60, 1, Verdict::Pass);
    let st = &run.status;
    assert_eq!((st.failed_analyses, st.stage_passed_analyses), (1, 1));
    assert!(!st.analyses.is_empty() && !st.baseline_reference.is_empty());
    assert_eq!(st.last_verdict, Some(Verdict::Pass));
    run.log.clear();
    run
}

#[test]
fn editing_the_candidate_mid_flight_restarts_at_stage_one() {
    let mut run = measured();
    run.edit_candidate(three_threads);
    // An analysis is due: the shell ran it, on pods of the old config.
    run.now += 60;
    let out = run.tick(Some(Verdict::Pass)).clone();
    assert_eq!(events(&out.actions), ["SpecChanged"]);
    let msg = match &out.actions[0] {
        Action::Event { message, .. } => message.clone(),
        a => panic!("{a:?}"),
    };
    for part in [
        "from puma 2×4 to puma 2×3",
        "at stage 2/3",
        "restarting at stage 1/3",
    ] {
        assert!(msg.contains(part), "{part} missing in {msg}");
    }
    let st = &out.status;
    assert_eq!(st.phase, Phase::Progressing);
    assert_eq!(
        (st.stage.as_deref(), st.stage_index),
        (Some("1/3"), Some(0))
    );
    assert_eq!(st.planned_weight, 30);
    assert_eq!(st.stage_started_at, None);
    assert_eq!(st.stage_entered_at, Some(Time(at(run.now))));
    assert_eq!(
        (
            st.failed_analyses,
            st.inconclusive_analyses,
            st.stage_passed_analyses
        ),
        (0, 0, 0)
    );
    assert!(
        st.analyses.is_empty(),
        "the old config's analysis was not kept"
    );
    assert!(st.baseline_reference.is_empty());
    assert_eq!(st.last_verdict, None);
    let c = st.candidate.as_ref().unwrap();
    assert_eq!(
        (c.summary.as_str(), c.config.threads),
        ("puma 2×3", Some(3))
    );
    // The new template goes out at once; the candidate shrinks to stage 1's size only once
    // the baseline has grown back to its share.
    assert_eq!(
        out.actions[1..],
        [
            Action::EnsureCandidate { replicas: 4 },
            Action::ScaleTarget { replicas: 4 }
        ]
    );
    run.now += 5;
    assert_eq!(
        run.tick(None).actions,
        [Action::EnsureCandidate { replicas: 2 }]
    );
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage_started_at, Some(Time(at(run.now))));
    while !run.status.phase.is_terminal() {
        run.now += 60;
        run.tick(Some(Verdict::Pass));
        assert!(run.now < 10_000);
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(
        run.events().iter().filter(|e| *e == "SpecChanged").count(),
        1
    );
    assert_eq!(run.status.failed_analyses, 0);
}

#[test]
fn the_stage_clock_waits_until_the_candidate_runs_the_new_config() {
    let mut run = measured();
    run.edit_candidate(three_threads);
    // The re-apply keeps failing: the candidate keeps its old template.
    for _ in 0..6 {
        run.now += 5;
        let out = run.tick(None).clone();
        assert!(
            out.actions
                .iter()
                .any(|a| matches!(a, Action::EnsureCandidate { .. })),
            "{:?}",
            out.actions
        );
        run.world.candidate_stale = true;
    }
    assert_eq!(run.status.stage_started_at, None);
    assert!(run.status.analyses.is_empty());
    // Applied at last.
    for _ in 0..2 {
        run.now += 5;
        run.tick(None);
    }
    assert!(run.status.stage_started_at.is_some());
}

#[test]
fn a_pod_of_the_old_template_does_not_start_the_clock() {
    let mut run = measured();
    run.auto_settle = false;
    run.edit_candidate(three_threads);
    run.now += 5;
    run.tick(None);
    run.world.settle();
    run.now += 5;
    run.tick(None); // candidate asked down to 2
                    // Two ready pods, but the rollout of the new template is not done.
    let c = run.world.candidate.as_mut().unwrap();
    c.ready_replicas = 2;
    c.rolled_out = false;
    run.world.target.as_mut().unwrap().deployment.ready_replicas = 4;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage_started_at, None);
    run.world.settle();
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.stage_started_at, Some(Time(at(run.now))));
}

#[test]
fn an_edit_lifts_holds_of_the_old_config() {
    let mut run = in_stage_two(spec());
    run.spec.analysis.on_inconclusive = InconclusiveAction::Pause;
    run.advance(60, 4, Verdict::Inconclusive);
    assert_eq!(run.status.hold_reason.as_deref(), Some(INCONCLUSIVE_LIMIT));
    run.log.clear();
    run.edit_candidate(three_threads);
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.hold_reason, None);
    assert_eq!(run.status.inconclusive_analyses, 0);
    assert_eq!(run.status.stage.as_deref(), Some("1/3"));
    assert_eq!(run.events(), ["SpecChanged", "Resumed"]);
}

#[test]
fn serving_pods_never_drop_below_the_original_through_a_restart() {
    let mut run = Run::new(spec(), 6);
    run.auto_settle = false;
    let mut edited = false;
    for _ in 0..600 {
        if run.status.phase.is_terminal() {
            break;
        }
        if !edited && run.status.stage_index == Some(2) && run.status.stage_started_at.is_some() {
            // At 100%: the baseline has no pods left.
            run.edit_candidate(three_threads);
            edited = true;
        }
        run.world.settle();
        run.now += 15;
        run.tick(Some(Verdict::Pass));
        let w = &run.world;
        let ready = w.target.as_ref().unwrap().deployment.ready_replicas
            + w.candidate.as_ref().map_or(0, |c| c.ready_replicas);
        assert!(ready >= 6, "only {ready} ready at {}", run.now);
    }
    assert!(edited);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(
        run.events().iter().filter(|e| *e == "SpecChanged").count(),
        1
    );
}

#[test]
fn other_spec_edits_re_apply_the_candidate_without_a_restart() {
    let mut run = measured();
    run.world.generation += 1; // say, a label or stage duration changed
    run.now += 5;
    let out = run.tick(None).clone();
    assert!(events(&out.actions).is_empty(), "{:?}", out.actions);
    assert_eq!(out.actions, [Action::EnsureCandidate { replicas: 4 }]);
    assert_eq!(out.status.failed_analyses, 1);
    assert_eq!(out.status.stage.as_deref(), Some("2/3"));
}

#[test]
fn an_edit_while_rolling_back_does_not_restart() {
    let mut run = measured();
    run.tick_with(None, |o| o.abort_requested = true);
    assert_eq!(run.status.phase, Phase::RollingBack);
    run.edit_candidate(three_threads);
    for _ in 0..4 {
        run.now += 5;
        run.tick(None);
    }
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert!(!run.events().contains(&"SpecChanged".to_string()));
}

#[test]
fn an_edit_while_promoting_promotes_what_was_judged() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.auto_settle = false;
    while run.status.phase != Phase::Promoting {
        run.now += 30;
        run.tick(Some(Verdict::Pass));
        run.world.settle();
        assert!(run.now < 10_000, "{:?}", run.status.message);
    }
    let judged = run.spec.candidate.clone();
    assert_eq!(run.status.promoting.as_ref(), judged.as_ref());
    run.edit_candidate(three_threads);
    run.log.clear();
    run.now += 5;
    run.tick(None);
    assert_eq!(
        run.status.phase,
        Phase::Promoting,
        "no restart, no rollback"
    );
    let warned: Vec<_> = run
        .log
        .iter()
        .filter_map(|a| match a {
            Action::Event {
                reason, message, ..
            } if reason == "SpecChanged" => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        warned,
        [
            "spec.candidate changed to puma 2×3 while promoting: the judged config puma 2×4 is \
          promoted; run a new experiment for the new one."
        ]
    );
    for _ in 0..20 {
        if run.status.phase.is_terminal() {
            break;
        }
        run.now += 5;
        run.tick(None);
        run.world.settle();
    }
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(
        run.status.message.as_deref(),
        Some("Promoted: Deployment storefront now runs puma 2×4.")
    );
    assert_eq!(run.status.candidate.as_ref().unwrap().summary, "puma 2×4");
    assert_eq!(
        run.events().iter().filter(|e| *e == "SpecChanged").count(),
        1
    );
}
