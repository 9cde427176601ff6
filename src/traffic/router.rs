//! `Router`: the one place that knows how each router works. The stage machine and the shell
//! ask it; nothing outside `traffic` looks at which router an experiment uses.
//!
//! Enum dispatch rather than a trait: the routers are a closed set named by the CRD
//! (`spec.traffic.router`), so the value read from the spec already is the router — no
//! factory to turn it into a trait object, nothing boxed, `Copy` into the pure core — and a
//! new router is a compile error at every question it has to answer.

pub use crate::api::Router;

use super::split::{Live, ReplicaSplit, Sizing};
use super::{gateway, replicas};

impl Router {
    /// Replicas for a stage of `weight` percent when the target normally runs `original` pods.
    pub fn split(self, original: i32, weight: i32) -> ReplicaSplit {
        self.split_sized(original, weight, Sizing::Fixed)
    }

    /// [`Router::split`] for a target sized by someone else (an HPA): the `gatewayAPI` router
    /// never scales the target, so only the `replicas` router splits differently.
    pub fn split_sized(self, original: i32, weight: i32, sizing: Sizing) -> ReplicaSplit {
        let original = original.max(1);
        let weight = weight.clamp(0, 100);
        match (self, sizing) {
            (Router::Replicas, Sizing::Fixed) => replicas::split(original, weight),
            (Router::Replicas, Sizing::Autoscaled { max }) => {
                replicas::split_on_top(original, weight, max)
            }
            (Router::GatewayApi, _) => gateway::split(original, weight),
        }
    }

    /// The candidate's share is as real as the pods make it: planned weights are only
    /// approximated (`CoarseSplit`), never exact.
    pub fn splits_by_pods(self) -> bool {
        match self {
            Router::Replicas => true,
            Router::GatewayApi => false,
        }
    }

    /// The extra objects to observe and write besides the target and candidate Deployments:
    /// for `gatewayAPI` the HTTPRoute, the Services of the namespace (the user's and the two
    /// variant Services) and the target's ReplicaSets (the baseline Service's pin).
    pub fn uses_route(self) -> bool {
        match self {
            Router::Replicas => false,
            Router::GatewayApi => true,
        }
    }

    /// The share the candidate gets now, percent: from the ready pods (`replicas`) or from the
    /// route's weights (`gatewayAPI`; `route_weight` as read off the route, `None` while it
    /// is not split or not seen).
    pub fn effective_weight(
        self,
        candidate_ready: i32,
        baseline_ready: i32,
        route_weight: Option<i32>,
    ) -> i32 {
        match self {
            Router::Replicas => replicas::effective_weight(candidate_ready, baseline_ready),
            Router::GatewayApi => route_weight.unwrap_or(0),
        }
    }

    /// The candidate's traffic is back on the baseline at `split` — only then may a candidate
    /// shrink (a restart at stage 1, weights lowered in the spec).
    pub fn traffic_back(self, split: &ReplicaSplit, live: &Live) -> bool {
        match self {
            Router::Replicas => replicas::traffic_back(split, live),
            Router::GatewayApi => gateway::traffic_back(live),
        }
    }

    /// The target's replicas to aim for at `split`, given what is ready now.
    pub fn baseline_replicas(self, split: &ReplicaSplit, live: &Live) -> i32 {
        match self {
            Router::Replicas => replicas::baseline_replicas(split, live),
            Router::GatewayApi => split.baseline,
        }
    }

    /// The apply action: the candidate weight to write into the route now, if any. Never
    /// onto pods that cannot take it: the full weight once the stage's pods are ready, and
    /// once the split was in force, no more than the pods still ready carry at the stage's
    /// share per pod.
    pub fn weight_to_apply(self, split: &ReplicaSplit, live: &Live) -> Option<i32> {
        match self {
            Router::Replicas => None,
            Router::GatewayApi => gateway::weight_to_apply(split, live),
        }
    }

    /// The last stage's split until the candidate has carried it through a passing analysis:
    /// the target is not scaled to 0 before that. `replicas` keeps one baseline pod behind the
    /// Service (a standby: the Service always has a ready pod of a config known to work, and
    /// the target grows back from it); `gatewayAPI` keeps all baseline pods anyway. With an
    /// HPA sizing the target there is no standby: the HPA would size a 1-pod target for the
    /// whole load (it counts the candidate's pods), and at 0 it leaves the target alone.
    pub fn with_standby(self, split: ReplicaSplit, sizing: Sizing) -> ReplicaSplit {
        match (self, sizing) {
            (Router::Replicas, Sizing::Fixed) => replicas::with_standby(split),
            _ => split,
        }
    }

    /// The stage's split is in force. `candidate_done`: the candidate runs the spec's config
    /// at the stage's size, rolled out and ready.
    pub fn in_force(self, split: &ReplicaSplit, live: &Live, candidate_done: bool) -> bool {
        match self {
            Router::Replicas => replicas::in_force(split, live, candidate_done),
            Router::GatewayApi => gateway::in_force(live, candidate_done),
        }
    }

    /// The restore action is needed: the route still sends traffic to the candidate (the
    /// replicas router restores by scaling the target, which the machine does for both).
    pub fn needs_restore(self, effective_weight: i32) -> bool {
        match self {
            Router::Replicas => false,
            Router::GatewayApi => gateway::needs_restore(effective_weight),
        }
    }
}
