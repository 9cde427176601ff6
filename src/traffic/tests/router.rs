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
        started: false,
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
    assert_eq!(r.weight_to_apply(&split, &starting), None);
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
    assert_eq!(split.candidate, 2);
    let coming = live(30, (6, 6), 1, 0);
    assert_eq!(
        r.weight_to_apply(&split, &coming),
        None,
        "never onto pods not ready"
    );
    let ready = live(30, (6, 6), 2, 0);
    assert_eq!(r.baseline_replicas(&split, &ready), 6);
    assert_eq!(r.weight_to_apply(&split, &ready), Some(30));
    assert!(!r.in_force(&split, &ready, true) && !r.traffic_back(&split, &ready));
    let there = live(30, (6, 6), 2, 30);
    assert_eq!(r.weight_to_apply(&split, &there), None);
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

#[test]
fn gateway_pods_that_lose_readiness_give_their_share_back_at_once() {
    let r = Router::GatewayApi;
    let split = r.split(3, 100);
    assert_eq!(
        (split.baseline, split.candidate),
        (3, 3),
        "the baseline keeps its pods"
    );
    let started = |ready, effective| Live {
        started: true,
        ..live(100, (3, 3), ready, effective)
    };
    // 1 of 3 lost: the two left carry a third each, as before.
    assert_eq!(r.weight_to_apply(&split, &started(2, 100)), Some(66));
    assert_eq!(
        r.weight_to_apply(&split, &started(2, 66)),
        None,
        "already there"
    );
    assert_eq!(r.weight_to_apply(&split, &started(0, 66)), Some(0));
    // Ready again: the stage's weight is back.
    assert_eq!(r.weight_to_apply(&split, &started(3, 0)), Some(100));
    // Before the split was in force, missing pods are pods not up yet: the route waits.
    let stage2 = r.split(3, 70);
    let rising = live(70, (3, 3), 1, 30);
    assert_eq!(r.weight_to_apply(&stage2, &rising), None);
}

#[test]
fn the_last_stage_keeps_a_standby_only_where_one_helps() {
    let full = Router::Replicas.split(3, 100);
    let kept = Router::Replicas.with_standby(full, Sizing::Fixed);
    assert_eq!(
        (kept.baseline, kept.candidate, kept.planned_effective_weight),
        (1, 3, 75)
    );
    let one = Router::Replicas.with_standby(Router::Replicas.split(1, 100), Sizing::Fixed);
    assert_eq!(
        (one.baseline, one.candidate, one.planned_effective_weight),
        (1, 1, 50)
    );
    let below = Router::Replicas.split(3, 70);
    assert_eq!(Router::Replicas.with_standby(below, Sizing::Fixed), below);
    let hpa = Sizing::Autoscaled { max: 6 };
    assert_eq!(
        Router::Replicas.with_standby(full, hpa),
        full,
        "an HPA would size it"
    );
    let gw = Router::GatewayApi.split(3, 100);
    assert_eq!(Router::GatewayApi.with_standby(gw, Sizing::Fixed), gw);
}
