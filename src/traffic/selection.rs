//! The selection's split (docs/selection.md): every variant — each surviving candidate and the
//! fresh baseline — gets the same share, and the target is never scaled, so the service never
//! runs below the baseline's capacity while variants come and go.

use super::router::Router;
use super::split::{ReplicaSplit, Sizing};

/// Pods and shares of one selection split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelectionSplit {
    /// Pods of each variant (candidate or fresh baseline).
    pub pods_per_variant: i32,
    /// The target's pods: all it had (`original`), untouched.
    pub baseline: i32,
    /// Each variant's share of traffic, percent (rounded).
    pub share: i32,
    /// The candidates' shares together, percent: at most `api::MAX_SELECTION_TOTAL`.
    pub candidates_total: i32,
}

/// Why a split cannot be given: the replicas router's one pod per variant is too coarse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "with one pod per variant the replicas router gives {candidates} candidates {total}% of \
     traffic from a {original}-replica target (at most {max}%): run the target with at least \
     {needed} replicas, give fewer candidates, or use traffic.router: gatewayAPI"
)]
pub struct SplitTooCoarse {
    pub candidates: i32,
    pub original: i32,
    pub total: i32,
    pub max: i32,
    pub needed: i32,
}

impl Router {
    /// The split for `candidates` surviving candidates (plus the fresh baseline when `fresh`)
    /// at `weight` percent each, from a target of `original` pods.
    ///
    /// `replicas`: the variants' pods come on top of the target's (as with an HPA), `k` each
    /// with `k / (original + n·k)` ≈ `weight` and `k ≥ 1`. `gatewayAPI`: exact route weights,
    /// `⌈original × weight⌉` pods each (at least one).
    pub fn selection_split(
        self,
        original: i32,
        weight: i32,
        candidates: i32,
        fresh: bool,
    ) -> Result<SelectionSplit, SplitTooCoarse> {
        let original = original.max(1);
        let weight = weight.clamp(1, crate::api::MAX_SELECTION_TOTAL);
        let candidates = candidates.max(0);
        let n = candidates + i32::from(fresh);
        let max = crate::api::MAX_SELECTION_TOTAL;
        let (k, share) = match self {
            Router::Replicas => {
                let rest = (100 - n * weight).max(1);
                let k = ((i64::from(original) * i64::from(weight) + i64::from(rest) / 2)
                    / i64::from(rest))
                .max(1) as i32;
                (k, super::percent(k, original + n * k))
            }
            Router::GatewayApi => (
                ((i64::from(original) * i64::from(weight) + 99) / 100).max(1) as i32,
                weight,
            ),
        };
        let total = match self {
            Router::Replicas => super::percent(candidates * k, original + n * k),
            Router::GatewayApi => candidates * weight,
        };
        if total > max {
            // The smallest target where the candidates' pods are at most half of all pods:
            // c·k ≤ (B + n·k) / 2.
            let needed = (2 * candidates - n) * k;
            return Err(SplitTooCoarse {
                candidates,
                original,
                total,
                max,
                needed: needed.max(original + 1),
            });
        }
        Ok(SelectionSplit {
            pods_per_variant: k,
            baseline: original,
            share,
            candidates_total: total,
        })
    }

    /// A stage's split with a fresh baseline of `fresh` pods beside the candidate
    /// (docs/selection.md). `replicas`: its pods are on top of the target's, behind the
    /// user's Service, so the candidate is sized for c / (b + c + f) ≈ `weight` — the target
    /// and the candidate share the same pods as without it (`Fixed`), or the candidate comes
    /// on top of an autoscaled target. `gatewayAPI` gives the fresh baseline its own route
    /// weight; the candidate's split is unchanged.
    pub fn split_beside_fresh(
        self,
        original: i32,
        weight: i32,
        sizing: Sizing,
        fresh: i32,
    ) -> ReplicaSplit {
        let split = self.split_sized(original, weight, sizing);
        if fresh <= 0 || !(1..100).contains(&weight) || !self.splits_by_pods() {
            return split;
        }
        let (w, f) = (i64::from(weight), i64::from(fresh));
        let (baseline, candidate) = match sizing {
            Sizing::Fixed => {
                let total = split.baseline + split.candidate;
                let c = (w * (i64::from(total) + f) + 50) / 100;
                let c = c.clamp(1, i64::from(total - 1).max(1)) as i32;
                (total - c, c)
            }
            Sizing::Autoscaled { max } => {
                let b = i64::from(split.baseline);
                let c = (w * (b + f) + (100 - w) / 2) / (100 - w);
                (split.baseline, c.clamp(1, i64::from(max.max(1))) as i32)
            }
        };
        ReplicaSplit {
            baseline,
            candidate,
            planned_effective_weight: super::percent(candidate, baseline + candidate + fresh),
        }
    }

    /// An eliminated variant's traffic is back on the others: the replicas router takes it
    /// away by removing the pods (the target was never scaled down); the route must first
    /// carry no weight to it.
    pub fn variant_traffic_back(self, share_in_force: i32) -> bool {
        match self {
            Router::Replicas => true,
            Router::GatewayApi => share_in_force == 0,
        }
    }
}
