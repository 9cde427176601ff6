//! `judge: sequential` in the stage machine: a regression the tests show rolls back at once,
//! waiting for requests is not "inconclusive" while the stage runs, and "no worse" ends a
//! stage early (after a third of it).

use super::*;
use crate::api::{Evidence, Phase, Shown};

/// One analysis whose latency check is a sequential test that shows `shown`.
fn analysis(run: &mut Run, secs: i64, shown: Shown) {
    run.now += secs;
    let verdict = match shown {
        Shown::Worse => Verdict::Fail,
        Shown::Waiting => Verdict::Inconclusive,
        Shown::NoWorse | Shown::Open => Verdict::Pass,
    };
    run.tick_with(Some(verdict), |obs| {
        if let Some(a) = obs.analysis.as_mut() {
            for c in &mut a.record.checks {
                c.verdict = verdict;
                c.evidence = Some(Evidence {
                    shown,
                    ratio_above: (shown == Shown::Worse).then_some(1.6),
                    ratio_within: (shown == Shown::NoWorse).then_some(1.05),
                    candidate_requests: 400.0,
                    baseline_requests: Some(800.0),
                    needs_requests: (shown == Shown::Waiting).then_some(450.0),
                });
            }
        }
    });
}

#[test]
fn a_regression_the_test_shows_rolls_back_at_the_first_such_analysis() {
    let mut run = in_stage_one();
    analysis(&mut run, 60, Shown::Open);
    assert_eq!(run.status.phase, Phase::Progressing);
    // failureLimit 1 tolerates one failed per-interval analysis; a shown regression is not
    // counted towards it: the evidence is already as strong as the experiment asked for.
    analysis(&mut run, 60, Shown::Worse);
    assert_eq!(run.status.phase, Phase::RollingBack);
    assert_eq!(run.status.failed_analyses, 1);
    let reason = run.status.decision.as_ref().map(|d| d.message.clone());
    assert!(
        reason
            .as_deref()
            .is_some_and(|m| m.contains("sequential test")),
        "{reason:?}"
    );
}

#[test]
fn waiting_for_requests_counts_only_once_the_stage_is_over() {
    let mut run = in_stage_one();
    // inconclusiveLimit 3: ten analyses waiting within the 10-minute stage are not counted.
    for _ in 0..9 {
        analysis(&mut run, 60, Shown::Waiting);
    }
    assert_eq!(run.status.inconclusive_analyses, 0);
    assert_eq!(run.status.phase, Phase::Progressing);
    assert_eq!(run.status.stage_index, Some(0), "waiting never advances");
    // Past the stage's end the stage has had its time: not enough data is inconclusive.
    for _ in 0..4 {
        analysis(&mut run, 60, Shown::Waiting);
    }
    assert_eq!(run.status.phase, Phase::RollingBack);
}

#[test]
fn a_stage_shown_no_worse_ends_after_a_third_of_its_duration() {
    let mut run = in_stage_one();
    analysis(&mut run, 60, Shown::NoWorse); // t = 70: too early (a third is 200 s)
    analysis(&mut run, 60, Shown::NoWorse); // t = 130
    assert_eq!(run.status.stage_index, Some(0));
    analysis(&mut run, 60, Shown::Open); // t = 190
    analysis(&mut run, 60, Shown::Open); // t = 250: past a third, but not shown no worse
    assert_eq!(run.status.stage_index, Some(0));
    analysis(&mut run, 60, Shown::NoWorse); // t = 310
    assert_eq!(run.status.stage_index, Some(1));
    assert_eq!(run.events(), ["StageAdvanced"]);
}

#[test]
fn per_interval_checks_keep_their_failure_limit() {
    let mut run = in_stage_one();
    run.advance(60, 1, Verdict::Fail);
    assert_eq!(run.status.phase, Phase::Progressing, "1 failure tolerated");
}

#[test]
fn the_last_stage_ends_on_an_analysis_the_candidate_carried_without_the_standby() {
    let mut run = in_stage_one();
    let mut released = false;
    // Every analysis shows no worse: each stage ends after a third of it. The one that
    // releases the last stage's standby ran beside it (its pass is the first there), so it
    // cannot end the stage: the candidate has not carried 100 % through an analysis yet.
    // At the last stage the first analyses wait for requests until past a third of it (as
    // the e2e Rails app's did at 75 %), so its first pass is also its early end's moment.
    let mut waits = 4;
    for _ in 0..40 {
        if run.status.phase != Phase::Progressing {
            break;
        }
        let before = run.events().len();
        let last_stage = run.status.stage_index == Some(2);
        let shown = if last_stage && waits > 0 {
            waits -= 1;
            Shown::Waiting
        } else {
            Shown::NoWorse
        };
        analysis(&mut run, 60, shown);
        let releasing = run.events()[before..]
            .iter()
            .any(|e| e == "StandbyReleased");
        // The reconcile the standby's scale-down wakes, with no new analysis.
        run.now += 5;
        run.tick(None);
        if releasing {
            let now = run.events()[before..].to_vec();
            assert_eq!(run.status.phase, Phase::Progressing, "{now:?}");
            released = true;
        }
    }
    assert!(released);
    assert_eq!(run.status.phase, Phase::Promoting);
    assert_eq!(run.status.stage_passed_analyses, 2);
    assert_eq!(waits, 0);
}
