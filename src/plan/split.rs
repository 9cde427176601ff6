//! The split the router really gives for the planned stages — a fresh baseline beside the
//! candidate counted —: `status.plannedEffectiveWeights` and, when it is far from the plan,
//! the `CoarseSplit` Event at the start.

use crate::api::ConcurrencyExperimentSpec;
use crate::traffic::{ReplicaSplit, SelectionSplit, Sizing};

/// The fresh baseline beside a stage of `weight` percent (docs/selection.md): its pods and
/// share, when the spec has one (`baseline.fresh`, or after a selection) and the stage leaves
/// the baseline any traffic (below 100 %). The same size as alone in a selection.
pub fn fresh_baseline(
    spec: &ConcurrencyExperimentSpec,
    original: i32,
    weight: i32,
) -> Option<SelectionSplit> {
    if !spec.fresh_baseline() || weight >= 100 {
        return None;
    }
    let w = spec.selection_or_default().weight;
    let split = spec
        .traffic
        .router
        .selection_split(original, w, 0, true)
        .ok()?;
    // The route gives the candidate its exact weight first.
    Some(SelectionSplit {
        share: split.share.min(100 - weight),
        ..split
    })
}

/// A stage's split, the fresh baseline's pods counted.
pub fn stage_split(
    spec: &ConcurrencyExperimentSpec,
    original: i32,
    weight: i32,
    sizing: Sizing,
) -> ReplicaSplit {
    let fresh = fresh_baseline(spec, original, weight).map_or(0, |f| f.pods_per_variant);
    spec.traffic
        .router
        .split_beside_fresh(original, weight, sizing, fresh)
}

/// Per stage, the candidate's share the router really gives.
pub fn planned_effective_weights(
    spec: &ConcurrencyExperimentSpec,
    original: i32,
    sizing: Sizing,
) -> Vec<i32> {
    spec.stages
        .iter()
        .map(|s| stage_split(spec, original, s.weight, sizing).planned_effective_weight)
        .collect()
}

/// Percentage points a stage's real share may miss its planned weight by before the start
/// says so: 2 of 6 pods (33% for 30%) is rounding, 1 + 1 pods (50% for 30%) is not.
pub const COARSE_SPLIT_POINTS: i32 = 5;

/// The `CoarseSplit` message when the replicas router cannot give the planned weights (one
/// stage off by more than `COARSE_SPLIT_POINTS`); `status.plannedEffectiveWeights` always
/// shows the real shares.
pub fn coarse_split(
    spec: &ConcurrencyExperimentSpec,
    original: i32,
    sizing: Sizing,
) -> Option<String> {
    if !spec.traffic.router.splits_by_pods() {
        return None;
    }
    let effective = planned_effective_weights(spec, original, sizing);
    let planned: Vec<i32> = spec.stages.iter().map(|s| s.weight).collect();
    let coarse = effective
        .iter()
        .zip(&planned)
        .any(|(e, p)| (e - p).abs() > COARSE_SPLIT_POINTS);
    if !coarse {
        return None;
    }
    let list = |v: &[i32]| {
        v.iter()
            .map(|w| format!("{w}%"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let replicas = if original == 1 { "replica" } else { "replicas" };
    Some(format!(
        "Deployment {} has {original} {replicas}: the replicas router splits traffic by pods, \
         so the candidate gets {} for the planned {}. For exact weights use traffic.router: \
         gatewayAPI, or run the target with more replicas.",
        spec.target_ref.name,
        list(&effective),
        list(&planned)
    ))
}
