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
