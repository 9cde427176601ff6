//! `replicas` router: candidate pods join the target's own Service, which spreads requests
//! over ready pods — so the split is the pod ratio, and moving it means scaling the two
//! Deployments. No object beyond them is read or written.

use super::split::{percent, Live, ReplicaSplit};

/// Total stays at `original` (never below), the candidate gets at least one pod, and below
/// 100% the baseline keeps at least one — with one pod that means 1 + 1 (50%), which status
/// reports as the effective weight rather than pretending to give 30%.
pub(super) fn split(original: i32, weight: i32) -> ReplicaSplit {
    if weight == 100 {
        return ReplicaSplit {
            baseline: 0,
            candidate: original,
            planned_effective_weight: 100,
        };
    }
    let total = original.max(2);
    let wanted = ((original as i64 * weight as i64 + 50) / 100) as i32;
    let candidate = wanted.clamp(1, total - 1);
    let baseline = total - candidate;
    ReplicaSplit {
        baseline,
        candidate,
        planned_effective_weight: percent(candidate, baseline + candidate),
    }
}

/// One baseline pod stays beside a candidate that has the whole share planned.
pub(super) fn with_standby(split: ReplicaSplit) -> ReplicaSplit {
    if split.baseline > 0 || split.candidate < 1 {
        return split;
    }
    ReplicaSplit {
        baseline: 1,
        candidate: split.candidate,
        planned_effective_weight: percent(split.candidate, split.candidate + 1),
    }
}

/// With an HPA sizing the target (`Sizing::Autoscaled`): the target keeps its pods and the
/// candidate's share comes on top, `original × w / (100 − w)` pods, at most `max`.
pub(super) fn split_on_top(original: i32, weight: i32, max: i32) -> ReplicaSplit {
    if weight == 100 {
        return split(original, weight);
    }
    let on_top =
        (original as i64 * weight as i64 + (100 - weight) as i64 / 2) / (100 - weight) as i64;
    let candidate = on_top.clamp(1, max.max(1) as i64) as i32;
    ReplicaSplit {
        baseline: original,
        candidate,
        planned_effective_weight: percent(candidate, original + candidate),
    }
}

/// The target is back at its share, and ready there.
pub(super) fn traffic_back(split: &ReplicaSplit, live: &Live) -> bool {
    live.baseline_replicas >= split.baseline && live.baseline_ready >= split.baseline
}

/// The baseline covers what the candidate does not serve (yet, or any more, when its pods
/// fail after the split was in force), so the service never runs below its original size.
pub(super) fn baseline_replicas(split: &ReplicaSplit, live: &Live) -> i32 {
    split.baseline.max(live.original - live.candidate_ready)
}

pub(super) fn in_force(split: &ReplicaSplit, live: &Live, candidate_done: bool) -> bool {
    candidate_done
        && live.baseline_replicas == split.baseline
        && live.effective_weight >= split.planned_effective_weight
}

/// The ready-pod ratio.
pub(super) fn effective_weight(candidate_ready: i32, baseline_ready: i32) -> i32 {
    percent(candidate_ready, baseline_ready + candidate_ready)
}
