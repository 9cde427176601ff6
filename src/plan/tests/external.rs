//! `promotion: external` (GitOps): hold at the last stage with the patch, complete once Git
//! brings the candidate config, never write the target's template.

use super::*;
use crate::api::{Phase, Promotion};

fn external(extra: &str) -> ConcurrencyExperimentSpec {
    spec_with(&format!(
        "promotion: external\nstages: [{{weight: 50, duration: 1m}}, {{weight: 100, duration: \
         1m}}]\n{extra}"
    ))
}

fn patch() -> crate::api::PromotionPatch {
    crate::api::PromotionPatch {
        container: "web".into(),
        summary: "set RAILS_MAX_THREADS=4 on container web".into(),
        strategic_merge_patch: "spec: …".into(),
    }
}

/// A run whose shell reports the patch for the target, as `workload::promotion_patch` makes it.
fn run_of(spec: ConcurrencyExperimentSpec) -> Run {
    let mut run = Run::new(spec, 4);
    run.world.target.as_mut().unwrap().promotion_patch = Some(patch());
    run
}

/// All stages passed, held for Git.
fn held(spec: ConcurrencyExperimentSpec) -> Run {
    let mut run = run_of(spec);
    run.tick(None);
    run.advance(60, 8, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(AWAITING_EXTERNAL_PROMOTION)
    );
    run
}

/// What Argo CD or Flux do on sync after the commit: the whole manifest applied — a new
/// template carrying the candidate config (and nothing else, so its promoted fingerprint is
/// the one recorded), and `spec.replicas` as Git has it.
fn git_applies(run: &mut Run, replicas: i32) {
    let t = run.world.target.as_mut().unwrap();
    t.runs_candidate_config = true;
    t.template_hash = TEMPLATE_PROMOTED.into();
    t.promotion_patch = None;
    t.deployment.replicas = replicas;
    t.deployment.ready_replicas = 0;
    t.deployment.rolled_out = false;
}

fn until_finished(run: &mut Run) {
    for _ in 0..20 {
        run.now += 5;
        run.tick(None);
        if run.status.phase.is_terminal() {
            return;
        }
    }
    panic!("not finished: {:?}", run.status.message);
}

fn wrote_template(run: &Run) -> usize {
    run.count(|a| *a == Action::PromoteTarget)
}

#[test]
fn it_holds_with_the_patch_and_completes_when_git_brings_the_candidate_config() {
    let mut run = held(external(""));
    let st = &run.status;
    assert_eq!(st.promotion_patch, Some(patch()));
    assert_eq!(
        condition(st, conditions::PROGRESSING).1,
        AWAITING_EXTERNAL_PROMOTION
    );
    let msg = st.message.clone().unwrap();
    assert!(
        msg.contains("Commit to Git: set RAILS_MAX_THREADS=4 on container web"),
        "{msg}"
    );
    let note = message(&run.log, AWAITING_EXTERNAL_PROMOTION);
    assert!(
        note.contains("until Git promotes: set RAILS_MAX_THREADS=4"),
        "{note}"
    );
    assert!(note.ends_with("spec: …"), "the patch itself: {note}");
    // The candidate serves everything meanwhile; the hold lasts (no deadline) and says
    // nothing new.
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 0);
    let events = run.events().len();
    run.advance(600, 6, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused);
    assert_eq!(run.events().len(), events);
    // Git syncs the commit, with the replicas it has (the target's own size).
    git_applies(&mut run, 4);
    until_finished(&mut run);
    let st = &run.status;
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.decision.as_ref().unwrap().reason, "PromotedExternally");
    assert_eq!(st.promotion_patch, Some(patch()), "kept as the record");
    let t = &run.world.target.as_ref().unwrap().deployment;
    assert_eq!((t.replicas, t.ready_replicas), (4, 4));
    assert!(run.world.candidate.is_none());
    assert_eq!(wrote_template(&run), 0);
    let events = run.events();
    assert!(!events.contains(&"TargetChanged".to_string()), "{events:?}");
    assert!(!events.contains(&"TargetScaled".to_string()), "{events:?}");
    assert!(events.ends_with(&["Promoting".to_string(), "Succeeded".to_string()]));
}

#[test]
fn with_gateway_api_the_route_is_restored_before_the_candidate_goes() {
    let spec = external("traffic: {router: gatewayAPI, httpRoute: storefront}\n");
    let mut run = held(spec);
    assert_eq!(run.world.route_weight, 100);
    run.log.clear();
    git_applies(&mut run, 4);
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(run.world.route_weight, 0);
    let at = |x: &Action| run.log.iter().position(|a| a == x).unwrap();
    assert!(at(&Action::RestoreRoute) < at(&Action::RemoveCandidate));
    assert_eq!(wrote_template(&run), 0);
}

#[test]
fn replicas_from_git_other_than_the_target_s_size_become_its_size() {
    let mut run = held(external(""));
    git_applies(&mut run, 6);
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert!(run.events().contains(&"TargetScaled".to_string()));
    assert_eq!(run.world.target.as_ref().unwrap().deployment.replicas, 6);
}

#[test]
fn any_other_template_change_while_held_is_still_target_changed() {
    let mut run = held(external(""));
    // The commit also bumped the image: the candidate config, and something never judged.
    git_applies(&mut run, 4);
    run.world.target.as_mut().unwrap().promoted_hash = Some("t=00000000000000b2".into());
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    assert_eq!(
        run.status.decision.as_ref().unwrap().reason,
        "TargetChanged"
    );
    assert_eq!(run.status.promotion_patch, None);
    assert_eq!(wrote_template(&run), 0);
}

#[test]
fn the_candidate_config_before_the_last_stage_rolls_back_unjudged() {
    let mut run = run_of(external(""));
    run.tick(None);
    run.advance(30, 2, Verdict::Pass);
    assert_eq!(run.status.stage_index, Some(0));
    git_applies(&mut run, 4);
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, "TargetChanged");
    assert!(
        d.message
            .contains("at stage 1/2, before the candidate was judged at 100 %"),
        "{}",
        d.message
    );
    assert!(d
        .message
        .contains("revert that change to return to puma 2×6"));
    // The target keeps what Git gave it, at its size.
    let t = run.world.target.as_ref().unwrap();
    assert!(t.runs_candidate_config);
    assert_eq!(t.deployment.replicas, 4);
    assert_eq!(wrote_template(&run), 0);
}

#[test]
fn approval_does_not_promote_and_spec_paused_holds_the_completion() {
    let mut run = held(external("approved: true\n"));
    run.world.approve_annotation = true;
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(AWAITING_EXTERNAL_PROMOTION)
    );
    run.spec.paused = true;
    git_applies(&mut run, 4);
    run.advance(60, 3, Verdict::Pass);
    assert_eq!(run.status.phase, Phase::Paused, "{:?}", run.status.message);
    assert!(!run.events().contains(&"TargetChanged".to_string()));
    run.spec.paused = false;
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::Succeeded);
    assert_eq!(wrote_template(&run), 0);
}

#[test]
fn a_reverted_commit_before_the_promotion_completed_rolls_back() {
    let mut run = held(external(""));
    git_applies(&mut run, 4);
    run.auto_settle = false;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Promoting);
    // Git reverts to the template the experiment started from.
    let t = run.world.target.as_mut().unwrap();
    t.runs_candidate_config = false;
    t.template_hash = TEMPLATE.into();
    run.auto_settle = true;
    until_finished(&mut run);
    assert_eq!(run.status.phase, Phase::RolledBack);
    let d = run.status.decision.clone().unwrap();
    assert!(d.message.contains("no longer carries the candidate config"));
    assert_eq!(wrote_template(&run), 0);
}

#[test]
fn a_gate_held_for_another_mode_decides_again_under_the_spec_s_mode() {
    // Held for approval, then the target moved under Git: an approval must not write it.
    let mut manual = external("");
    manual.promotion = Promotion::Manual;
    let mut run = {
        let mut r = run_of(manual);
        r.tick(None);
        r.advance(60, 8, Verdict::Pass);
        assert_eq!(r.status.hold_reason.as_deref(), Some(AWAITING_APPROVAL));
        r
    };
    run.spec.promotion = Promotion::External;
    run.world.approve_annotation = true;
    run.now += 5;
    run.tick(None);
    assert_eq!(
        run.status.hold_reason.as_deref(),
        Some(AWAITING_EXTERNAL_PROMOTION)
    );
    assert!(run.status.promotion_patch.is_some());
    assert_eq!(wrote_template(&run), 0);
    // And from external to auto: promoted at once.
    run.spec.promotion = Promotion::Auto;
    run.now += 5;
    run.tick(None);
    assert_eq!(run.status.phase, Phase::Promoting);
    assert_eq!(run.status.promotion_patch, None);
    assert_eq!(wrote_template(&run), 1);
}
