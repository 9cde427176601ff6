use crate::traffic::{percent, Live, ReplicaSplit, Router, Sizing};

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

fn live(weight: i32, baseline: (i32, i32), candidate_ready: i32, effective: i32) -> Live {
    Live {
        weight,
        original: 6,
        baseline_replicas: baseline.0,
        baseline_ready: baseline.1,
        candidate_ready,
        effective_weight: effective,
    }
}

#[test]
fn the_replicas_router_moves_traffic_by_pods() {
    let r = Router::Replicas;
    assert!(r.splits_by_pods() && !r.uses_route());
    assert_eq!(
        r.effective_weight(2, 4, Some(70)),
        33,
        "pods, not the route"
    );
    let split = r.split(6, 30);
    // The candidate is not ready yet: the baseline keeps covering for it.
    let starting = live(30, (6, 6), 0, 0);
    assert_eq!(r.baseline_replicas(&split, &starting), 6);
    assert!(r.traffic_back(&split, &starting));
    assert_eq!(r.weight_to_apply(&starting, false), None);
    assert!(!r.in_force(&split, &starting, false));
    let there = live(30, (4, 4), 2, 33);
    assert_eq!(r.baseline_replicas(&split, &there), 4);
    assert!(r.in_force(&split, &there, true));
    assert!(!r.needs_restore(33), "scaling the target restores it");
}

#[test]
fn the_gateway_router_moves_traffic_by_route_weights() {
    let r = Router::GatewayApi;
    assert!(!r.splits_by_pods() && r.uses_route());
    assert_eq!(r.effective_weight(2, 6, Some(30)), 30);
    assert_eq!(
        r.effective_weight(2, 6, None),
        0,
        "an unsplit route sends it nothing"
    );
    let split = r.split(6, 30);
    let ready = live(30, (6, 6), 2, 0);
    assert_eq!(r.baseline_replicas(&split, &ready), 6);
    assert_eq!(
        r.weight_to_apply(&ready, false),
        None,
        "never onto pods not ready"
    );
    assert_eq!(r.weight_to_apply(&ready, true), Some(30));
    assert!(!r.in_force(&split, &ready, true) && !r.traffic_back(&split, &ready));
    let there = live(30, (6, 6), 2, 30);
    assert_eq!(r.weight_to_apply(&there, true), None);
    assert!(r.in_force(&split, &there, true) && r.traffic_back(&split, &there));
    assert!(r.needs_restore(30) && !r.needs_restore(0));
}

#[test]
fn an_autoscaled_target_keeps_its_pods_and_the_candidate_comes_on_top() {
    let hpa = Sizing::Autoscaled { max: 10 };
    let s = |w| Router::Replicas.split_sized(3, w, hpa);
    let got: Vec<_> = [30, 50, 70, 100]
        .iter()
        .map(|&w| (s(w).baseline, s(w).candidate, s(w).planned_effective_weight))
        .collect();
    assert_eq!(got, [(3, 1, 25), (3, 3, 50), (3, 7, 70), (0, 3, 100)]);
    // Capped at the HPA's maxReplicas: the share is what the pods give, said as such.
    let capped = Router::Replicas.split_sized(4, 90, hpa);
    assert_eq!((capped.baseline, capped.candidate), (4, 10));
    assert_eq!(capped.planned_effective_weight, 71);
    // The gateway router never scales the target: the same as without an HPA.
    for w in [10, 50, 100] {
        assert_eq!(
            Router::GatewayApi.split_sized(5, w, Sizing::Autoscaled { max: 8 }),
            Router::GatewayApi.split(5, w)
        );
    }
}
