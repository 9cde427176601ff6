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
    fn percent_rounds() {
        assert_eq!(percent(2, 6), 33);
        assert_eq!(percent(4, 6), 67);
        assert_eq!(percent(0, 0), 0);
    }
}
