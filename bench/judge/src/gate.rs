//! The capacity gate as a replay runs it: the operator's own capacity model (`analysis::capacity`)
//! on the recorded GVL counters, before each weight step.

use concurrency_operator::analysis::{load_per_pod, pod_capacity, PerRequest};
use concurrency_operator::api::ServerKind;

use crate::manifest::Plan;
use crate::trace::{Interval, Trace};

/// What a replay rolled back on when the capacity gate refused a step.
pub const CAPACITY: &str = "capacity gate";

/// The capacity gate before the step out of `stage`, as `plan::capacity` runs it: every
/// analysis of the stage with enough candidate requests predicts the candidate's utilization
/// at the next stage's weight, from its CPU and I/O seconds per request (the GVL counters)
/// and the total rate of both variants; the worst decides, and above `maxPredictedUtilization`
/// the step is refused and the experiment rolled back. Never refuses without the counters
/// (older traces), without a next stage, or with the gate `off`.
pub fn refused(
    plan: &Plan,
    trace: &Trace,
    stage: usize,
    in_stage: &[(&Interval, &Interval)],
) -> bool {
    let (Some(max), Some(&weight)) = (plan.max_utilization, plan.weights.get(stage + 1)) else {
        return false;
    };
    let env = |k: &str| {
        trace
            .candidate_env
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.parse::<u32>().ok())
    };
    let (workers, threads) = (
        env("WEB_CONCURRENCY").unwrap_or(1),
        env("RAILS_MAX_THREADS"),
    );
    let seconds = plan.interval_seconds as f64;
    let worst = in_stage
        .iter()
        .filter(|(_, c)| c.requests >= plan.min_requests as f64 && c.requests > 0.0)
        .filter_map(|(b, c)| {
            let per_request = PerRequest {
                cpu: c.running? / c.requests,
                io: c.io_wait? / c.requests,
                blocking: 0.0,
            };
            let capacity = pod_capacity(ServerKind::Puma, workers, threads, per_request, None)?;
            let load = load_per_pod((b.requests + c.requests) / seconds, weight, 1)?;
            Some(load / capacity.per_pod)
        })
        .max_by(f64::total_cmp);
    worst.is_some_and(|u| u > max)
}
