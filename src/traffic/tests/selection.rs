//! The selection's split: one pod per variant minimum on top of the target, exact weights on
//! the route, the candidates together never above 50 %.

use crate::traffic::{Router, SelectionSplit};

#[test]
fn three_candidates_and_a_fresh_baseline_on_six_pods_get_ten_percent_each() {
    let split = Router::Replicas.selection_split(6, 10, 3, true).unwrap();
    assert_eq!(
        split,
        SelectionSplit {
            pods_per_variant: 1,
            baseline: 6,
            share: 10,
            candidates_total: 30
        }
    );
    // One eliminated: its pod goes, the target keeps its 6.
    let split = Router::Replicas.selection_split(6, 10, 2, true).unwrap();
    assert_eq!(
        (split.pods_per_variant, split.baseline, split.share),
        (1, 6, 11)
    );
}

#[test]
fn one_pod_per_variant_is_refused_where_it_would_give_the_candidates_more_than_half() {
    let err = Router::Replicas
        .selection_split(1, 10, 3, true)
        .unwrap_err();
    assert_eq!((err.total, err.needed), (60, 2));
    assert!(err.to_string().contains("at least 2 replicas"), "{err}");
    // Two replicas: 3 of 6 pods.
    let split = Router::Replicas.selection_split(2, 10, 3, true).unwrap();
    assert_eq!((split.share, split.candidates_total), (17, 50));
}

#[test]
fn many_pods_give_several_per_variant() {
    let split = Router::Replicas.selection_split(30, 10, 3, true).unwrap();
    assert_eq!((split.pods_per_variant, split.share), (5, 10));
}

#[test]
fn the_route_gives_exact_weights() {
    let split = Router::GatewayApi.selection_split(1, 10, 5, true).unwrap();
    assert_eq!(
        (
            split.pods_per_variant,
            split.baseline,
            split.share,
            split.candidates_total
        ),
        (1, 1, 10, 50)
    );
    assert!(!Router::GatewayApi.variant_traffic_back(10));
    assert!(Router::GatewayApi.variant_traffic_back(0));
    assert!(Router::Replicas.variant_traffic_back(10));
}

#[test]
fn a_stage_beside_a_fresh_baseline_sizes_the_candidate_for_its_share_of_all_pods() {
    use crate::traffic::Sizing;
    let r = Router::Replicas;
    let split = |w: i32, sizing: Sizing, fresh: i32| {
        let s = r.split_beside_fresh(6, w, sizing, fresh);
        (s.baseline, s.candidate, s.planned_effective_weight)
    };
    // 6 pods + 1 fresh: 2 of 7 at 30 %, 5 of 7 at 70 % (without it: 4 of 6).
    assert_eq!(split(30, Sizing::Fixed, 1), (4, 2, 29));
    assert_eq!(split(70, Sizing::Fixed, 1), (1, 5, 71));
    assert_eq!(split(70, Sizing::Fixed, 0), (2, 4, 67));
    // The target keeps at least one pod below 100 %; at 100 % there is no fresh baseline.
    assert_eq!(split(95, Sizing::Fixed, 1), (1, 5, 71));
    assert_eq!(split(100, Sizing::Fixed, 1), (0, 6, 100));
    // Autoscaled: the target keeps its pods, the candidate comes on top of both.
    assert_eq!(split(30, Sizing::Autoscaled { max: 10 }, 1), (6, 3, 30));
    assert_eq!(split(50, Sizing::Autoscaled { max: 4 }, 1), (6, 4, 36));
    // The gateway router's weights are exact: nothing changes.
    let g = Router::GatewayApi.split_beside_fresh(6, 30, Sizing::Fixed, 1);
    assert_eq!(g, Router::GatewayApi.split(6, 30));
}
