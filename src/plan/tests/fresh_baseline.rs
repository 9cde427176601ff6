//! The fresh baseline beside the long-running target: both baselines' values recorded from
//! the analysis that measured them, once.

use super::selection_world::*;
use super::*;
use crate::api::{BaselineValues, BaselinesMeasured};

fn values(target: f64, fresh: f64) -> Vec<BaselineValues> {
    vec![BaselineValues {
        name: "memory".into(),
        target: Some(target * MIB),
        fresh: Some(fresh * MIB),
        reason: None,
    }]
}

#[test]
fn both_baselines_values_are_recorded_from_the_analysis_that_measured_them_once() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let measured_now = |s: &Sel| s.run.status.fresh_baseline.as_ref()?.measured.clone();
    assert_eq!(measured_now(&s), None);
    let measured = |target: f64, secs: i64| BaselinesMeasured {
        at: Time(at(secs)),
        checks: values(target, 150.0),
    };
    let tick = |s: &mut Sel, b: BaselinesMeasured| {
        s.run.tick_with(None, |o| o.baselines = Some(b.clone()));
    };
    tick(&mut s, measured(210.0, 60));
    let recorded = measured_now(&s).unwrap();
    assert_eq!(recorded, measured(210.0, 60));
    // The same interval again (a replay after a restart) changes nothing.
    tick(&mut s, measured(999.0, 60));
    assert_eq!(measured_now(&s), Some(recorded));
    // The next interval replaces it.
    tick(&mut s, measured(220.0, 120));
    assert_eq!(measured_now(&s), Some(measured(220.0, 120)));
}

fn fresh_spec(router: Router) -> ConcurrencyExperimentSpec {
    let mut spec = spec_with(
        "baseline: {fresh: true}\n\
         stages: [{weight: 30, duration: 2m}, {weight: 100, duration: 2m}]\n",
    );
    spec.traffic.router = router;
    if router == Router::GatewayApi {
        spec.traffic.http_route = Some("storefront".into());
    }
    spec
}

fn selection_actions(step: &Step) -> Vec<SelectionAction> {
    step.actions
        .iter()
        .filter_map(|a| match a {
            Action::Selection(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// Walks `s` a minute at a time with passing analyses until `done`, at most `n` minutes.
fn walk_until(s: &mut Sel, n: usize, done: impl Fn(&Sel) -> bool) -> Vec<Step> {
    let mut steps = Vec::new();
    for _ in 0..n {
        if done(s) {
            break;
        }
        s.run.now += 60;
        steps.push(s.tick_verdict(None, Some(Verdict::Pass)));
    }
    assert!(done(s), "{:?}", s.run.status);
    steps
}

#[test]
fn a_fresh_baseline_runs_beside_the_stages_below_100_percent_and_goes_at_100() {
    let mut s = Sel::new(fresh_spec(Router::Replicas), 6);
    let first = s.tick(None);
    assert_eq!(s.run.status.phase, crate::api::Phase::Progressing);
    // One pod on top of the target's six at the default 10 %: 2 of 7 pods for the candidate.
    assert!(
        selection_actions(&first).contains(&SelectionAction::EnsureFreshBaseline { replicas: 1 })
    );
    assert_eq!(s.run.status.planned_effective_weights, [29, 100]);
    // The stage is not in force until the fresh baseline is ready beside the candidate.
    s.fresh = None;
    s.tick(None);
    assert_eq!(s.run.status.stage_started_at, None);
    s.tick(None);
    assert!(s.run.status.stage_started_at.is_some());
    let steps = walk_until(&mut s, 10, |s| s.run.status.stage.as_deref() == Some("2/2"));
    // At 100 % no baseline serves: the fresh baseline goes.
    let removed = steps
        .iter()
        .chain([&s.tick(None)])
        .any(|st| selection_actions(st).contains(&SelectionAction::RemoveFreshBaseline));
    assert!(removed);
    assert!(s.fresh.is_none());
    walk_until(&mut s, 10, |s| {
        s.run.status.phase == crate::api::Phase::Succeeded
    });
}

#[test]
fn on_the_gateway_the_fresh_baseline_has_its_own_route_weight_until_100() {
    let mut s = Sel::new(fresh_spec(Router::GatewayApi), 6);
    s.tick(None);
    s.tick(None);
    let weights: Vec<_> = s
        .run
        .log
        .iter()
        .filter_map(|a| match a {
            Action::SetRouteWeights {
                candidate_weight,
                fresh_baseline,
            } => Some((*candidate_weight, *fresh_baseline)),
            _ => None,
        })
        .collect();
    // The candidate's weight is exact, the fresh baseline takes 10 of the baseline's 70.
    assert_eq!(weights, [(30, 10)]);
    assert_eq!(s.fresh_weight, 10);
    s.tick(None);
    assert!(s.run.status.stage_started_at.is_some());
    walk_until(&mut s, 10, |s| s.run.status.stage.as_deref() == Some("2/2"));
    walk_until(&mut s, 3, |s| s.fresh.is_none());
    assert!(s.run.log.contains(&Action::SetRouteWeights {
        candidate_weight: 100,
        fresh_baseline: 0
    }));
    walk_until(&mut s, 10, |s| {
        s.run.status.phase == crate::api::Phase::Succeeded
    });
}

#[test]
fn status_shows_the_fresh_baseline_deployment_while_it_runs() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    let shown = s
        .run
        .status
        .fresh_baseline
        .as_ref()
        .and_then(|f| f.variant.clone());
    let shown = shown.expect("the fresh baseline is shown");
    assert_eq!(
        (
            shown.deployment.as_str(),
            shown.replicas,
            shown.ready_replicas
        ),
        ("storefront-fresh-baseline", 1, 1)
    );
    assert_eq!(shown.summary, "puma 2×6", "the target's config");
    s.abort = true;
    for _ in 0..3 {
        s.tick(None);
    }
    let shown = s
        .run
        .status
        .fresh_baseline
        .as_ref()
        .and_then(|f| f.variant.clone());
    assert_eq!(shown, None, "gone with its Deployment");
}
