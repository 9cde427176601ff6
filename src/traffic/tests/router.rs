use crate::traffic::{percent, ReplicaSplit, Router};

#[test]
fn six_pods_follow_the_default_stages() {
    let s = |w| Router::Replicas.split(6, w);
    assert_eq!(
        s(30),
        ReplicaSplit {
            baseline: 4,
            candidate: 2,
            planned_effective_weight: 33
        }
    );
    assert_eq!(
        s(70),
        ReplicaSplit {
            baseline: 2,
            candidate: 4,
            planned_effective_weight: 67
        }
    );
    assert_eq!(
        s(100),
        ReplicaSplit {
            baseline: 0,
            candidate: 6,
            planned_effective_weight: 100
        }
    );
}

#[test]
fn a_single_pod_target_never_hands_everything_to_the_candidate_early() {
    let s = Router::Replicas.split(1, 30);
    assert_eq!(
        (s.baseline, s.candidate, s.planned_effective_weight),
        (1, 1, 50)
    );
    let s = Router::Replicas.split(2, 99);
    assert_eq!((s.baseline, s.candidate), (1, 1));
}

#[test]
fn capacity_never_drops_below_the_original() {
    for original in 1..=20 {
        for weight in 1..=100 {
            let s = Router::Replicas.split(original, weight);
            assert!(s.baseline + s.candidate >= original, "{original} {weight}");
            assert!(s.candidate >= 1);
            if weight < 100 {
                assert!(s.baseline >= 1);
            }
            let g = Router::GatewayApi.split(original, weight);
            assert_eq!(g.baseline, original);
            assert!(
                g.candidate * 100 >= original * weight,
                "{original} {weight}"
            );
        }
    }
}

#[test]
fn percent_rounds() {
    assert_eq!(percent(2, 6), 33);
    assert_eq!(percent(4, 6), 67);
    assert_eq!(percent(0, 0), 0);
}
