//! What every router's answers are made of: the replica counts of a stage, the split as it
//! stands, and whole percentages.

/// Replica counts for one stage and the traffic share they give the candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSplit {
    pub baseline: i32,
    pub candidate: i32,
    /// Percent of traffic the candidate gets once both are ready at these counts.
    pub planned_effective_weight: i32,
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
    /// not scale a Deployment at 0) and the candidate keeps the size the HPA last gave.
    Autoscaled { max: i32 },
}

/// The split as observed in one reconcile, for a stage of `weight` percent: what a router's
/// answers about moving towards that stage depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live {
    /// The stage's planned weight, percent.
    pub weight: i32,
    /// The target's replicas before the experiment (`status.original.replicas`).
    pub original: i32,
    /// The target's `spec.replicas` now.
    pub baseline_replicas: i32,
    /// The target's ready pods now.
    pub baseline_ready: i32,
    /// The candidate's ready pods now.
    pub candidate_ready: i32,
    /// The share the candidate gets now (`Router::effective_weight`), percent.
    pub effective_weight: i32,
}

/// `part` of `whole` in whole percent, rounded; 0 when there is nothing.
pub fn percent(part: i32, whole: i32) -> i32 {
    if whole <= 0 {
        return 0;
    }
    ((part.max(0) as i64 * 100 + whole as i64 / 2) / whole as i64) as i32
}
