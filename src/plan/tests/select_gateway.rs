//! A selection on the `gatewayAPI` router: exact route weights, and a variant's traffic back
//! on the others before its pods go — at an elimination, at the choice and at a rollback
//! (`Sel` fails a removal under a live route weight).

use super::selection_world::*;
use super::*;
use crate::api::Phase;

fn gateway_selection() -> Sel {
    let mut spec = selection_spec("");
    spec.traffic.router = Router::GatewayApi;
    spec.traffic.http_route = Some("storefront".into());
    Sel::new(spec, 6)
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

#[test]
fn after_the_choice_the_route_leaves_the_candidates_before_their_pods_go() {
    let mut s = gateway_selection();
    s.tick(None);
    s.tick(None);
    assert_eq!((s.weights.clone(), s.fresh_weight), (vec![10, 10, 10], 10));
    let per = [
        (Verdict::Pass, 190.0),
        (Verdict::Pass, 185.0),
        (Verdict::Pass, 180.0),
    ];
    let mut chose = None;
    for _ in 0..25 {
        let step = s.interval(60, &per);
        if s.run.status.phase == Phase::Progressing {
            chose = Some(step);
            break;
        }
    }
    let step = chose.expect("a choice within the duration");
    assert_eq!(s.selection().winner, Some(2));
    // The route first keeps only the fresh baseline's share; no pods go yet.
    assert_eq!(
        selection_actions(&step),
        [SelectionAction::SetWeights {
            candidates: Vec::new(),
            fresh_baseline: 10
        }]
    );
    assert!(s.variants.iter().all(Option::is_some));
    // Seen at weight 0, every candidate variant is removed scaleDownDelay (10 s) after the
    // route last changed — stage 1's split for the winner is one more change.
    s.run.now += 10;
    let stage_one = s.tick(None);
    assert!(stage_one
        .actions
        .iter()
        .any(|a| matches!(a, Action::SetRouteWeights { .. })));
    assert!(!selection_actions(&stage_one)
        .iter()
        .any(|a| matches!(a, SelectionAction::RemoveVariant { .. })));
    s.run.now += 10;
    let next = s.tick(None);
    let removed: Vec<_> = selection_actions(&next)
        .into_iter()
        .filter(|a| matches!(a, SelectionAction::RemoveVariant { .. }))
        .collect();
    assert_eq!(removed.len(), 3, "{:?}", next.actions);
    assert!(s.variants.iter().all(Option::is_none));
    assert!(s.fresh.is_some(), "the fresh baseline stays for the stages");
}

#[test]
fn a_rollback_restores_the_route_before_any_variant_goes() {
    let mut s = gateway_selection();
    s.tick(None);
    s.tick(None);
    s.abort = true;
    let step = s.tick(None);
    assert_eq!(s.run.status.phase, Phase::RollingBack);
    assert!(
        step.actions.contains(&Action::RestoreRoute),
        "{:?}",
        step.actions
    );
    // Removed only once the route no longer sends them traffic (Sel checks the weights).
    for _ in 0..3 {
        s.run.now += 10;
        s.tick(None);
    }
    assert!(s.variants.iter().all(Option::is_none) && s.fresh.is_none());
    assert_eq!(s.run.status.phase, Phase::RolledBack);
}
