//! Replica arithmetic for both routers.

use crate::api::Router;

/// Replica counts for one stage and the traffic share they give the candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSplit {
    pub baseline: i32,
    pub candidate: i32,
    /// Percent of traffic the candidate gets once both are ready at these counts.
    pub planned_effective_weight: i32,
}

/// Replicas for a stage of `weight` percent when the target normally runs `original` pods.
///
/// `replicas` router: the Service spreads requests over ready pods, so the split is the pod
/// ratio. Total stays at `original` (never below), the candidate gets at least one pod, and
/// below 100% the baseline keeps at least one — with one pod that means 1 + 1 (50%), which
/// status reports as the effective weight rather than pretending to give 30%.
///
/// `gatewayAPI` router: the route weight is exact, so the baseline keeps all its pods and the
/// candidate gets enough for its share (at least one).
pub fn replica_split(router: Router, original: i32, weight: i32) -> ReplicaSplit {
    split(router, original, weight, Sizing::Fixed)
}

/// Who sizes the target while the experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizing {
    /// The operator: the split moves pods from the target to the candidate.
    Fixed,
    /// A HorizontalPodAutoscaler (`max`: its `maxReplicas`). The candidate's pods carry the
    /// target's labels, so the HPA counts them in its utilization and keeps the target sized for
    /// the whole load: scaling the target down would only be undone (a tug of war). Below 100 %
    /// the `replicas` router therefore leaves the target to the HPA and adds the candidate's
    /// share on top — `original × w / (100 − w)` pods, at most `max` — more pods for the
    /// experiment, never fewer than the load needs. At 100 % the target goes to 0 (an HPA does
    /// not scale a Deployment at 0) and the candidate gets a copy of the HPA.
    Autoscaled { max: i32 },
}

/// [`replica_split`] with the target's [`Sizing`].
pub fn split(router: Router, original: i32, weight: i32, sizing: Sizing) -> ReplicaSplit {
    let original = original.max(1);
    let weight = weight.clamp(0, 100);
    let wanted = |share: i32| ((original as i64 * share as i64 + 50) / 100) as i32;
    match router {
        Router::Replicas => {
            if weight == 100 {
                return ReplicaSplit {
                    baseline: 0,
                    candidate: original,
                    planned_effective_weight: 100,
                };
            }
            if let Sizing::Autoscaled { max } = sizing {
                let on_top = (original as i64 * weight as i64 + (100 - weight) as i64 / 2)
                    / (100 - weight) as i64;
                let candidate = on_top.clamp(1, max.max(1) as i64) as i32;
                return ReplicaSplit {
                    baseline: original,
                    candidate,
                    planned_effective_weight: percent(candidate, original + candidate),
                };
            }
            let total = original.max(2);
            let candidate = wanted(weight).clamp(1, total - 1);
            let baseline = total - candidate;
            ReplicaSplit {
                baseline,
                candidate,
                planned_effective_weight: percent(candidate, baseline + candidate),
            }
        }
        Router::GatewayApi => {
            let candidate = ((original as i64 * weight as i64 + 99) / 100).max(1) as i32;
            ReplicaSplit {
                baseline: original,
                candidate,
                planned_effective_weight: weight,
            }
        }
    }
}

/// `part` of `whole` in whole percent, rounded; 0 when there is nothing.
pub fn percent(part: i32, whole: i32) -> i32 {
    if whole <= 0 {
        return 0;
    }
    ((part.max(0) as i64 * 100 + whole as i64 / 2) / whole as i64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_pods_follow_the_default_stages() {
        let s = |w| replica_split(Router::Replicas, 6, w);
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
        let s = replica_split(Router::Replicas, 1, 30);
        assert_eq!(
            (s.baseline, s.candidate, s.planned_effective_weight),
            (1, 1, 50)
        );
        let s = replica_split(Router::Replicas, 2, 99);
        assert_eq!((s.baseline, s.candidate), (1, 1));
    }

    #[test]
    fn capacity_never_drops_below_the_original() {
        for original in 1..=20 {
            for weight in 1..=100 {
                let s = replica_split(Router::Replicas, original, weight);
                assert!(s.baseline + s.candidate >= original, "{original} {weight}");
                assert!(s.candidate >= 1);
                if weight < 100 {
                    assert!(s.baseline >= 1);
                }
                let g = replica_split(Router::GatewayApi, original, weight);
                assert_eq!(g.baseline, original);
                assert!(
                    g.candidate * 100 >= original * weight,
                    "{original} {weight}"
                );
            }
        }
    }

    #[test]
    fn an_autoscaled_target_keeps_its_pods_and_the_candidate_comes_on_top() {
        let s = |w| split(Router::Replicas, 3, w, Sizing::Autoscaled { max: 10 });
        let got: Vec<_> = [30, 50, 70, 100]
            .iter()
            .map(|&w| (s(w).baseline, s(w).candidate, s(w).planned_effective_weight))
            .collect();
        assert_eq!(got, [(3, 1, 25), (3, 3, 50), (3, 7, 70), (0, 3, 100)]);
        // Capped at the HPA's maxReplicas: the share is what the pods give, said as such.
        let capped = split(Router::Replicas, 4, 90, Sizing::Autoscaled { max: 10 });
        assert_eq!((capped.baseline, capped.candidate), (4, 10));
        assert_eq!(capped.planned_effective_weight, 71);
        // The gateway router never scales the target: the same as without an HPA.
        for w in [10, 50, 100] {
            assert_eq!(
                split(Router::GatewayApi, 5, w, Sizing::Autoscaled { max: 8 }),
                replica_split(Router::GatewayApi, 5, w)
            );
        }
    }

    #[test]
    fn percent_rounds() {
        assert_eq!(percent(2, 6), 33);
        assert_eq!(percent(4, 6), 67);
        assert_eq!(percent(0, 0), 0);
    }
}
