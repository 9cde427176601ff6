//! `queueTime` without `X-Request-Start`: the queue-time histogram is only written for requests
//! that carry the load balancer's header, so no value while the candidate served requests means
//! the header never arrived — said plainly, with what to do, instead of "no value" (which would
//! read as "no traffic").

use crate::api::{BuiltinMetric, Check, CheckResult, Verdict};

/// Rewrites the reason of each `queueTime` check that has no usable candidate value although
/// the candidate served `candidate_requests` (at least `minRequests`, and at least one).
pub fn note_missing_header(
    specs: &[Check],
    mut checks: Vec<CheckResult>,
    candidate_requests: Option<f64>,
    min_requests: i64,
) -> Vec<CheckResult> {
    let Some(served) = candidate_requests.filter(|n| *n >= (min_requests.max(1)) as f64) else {
        return checks;
    };
    for (spec, r) in specs.iter().zip(checks.iter_mut()) {
        let no_value = !r.candidate.is_some_and(f64::is_finite);
        if spec.metric == Some(BuiltinMetric::QueueTime)
            && no_value
            && r.verdict == Verdict::Inconclusive
        {
            r.reason = Some(format!(
                "no request of the candidate carried X-Request-Start ({} served in the \
                 interval): the load balancer in front does not stamp it, or the app does not \
                 record it — set it up (docs/experiment-reference.md, \"queueTime\"), or judge \
                 waiting with backlog or threadUtilization (Puma's own stats)",
                served.round()
            ));
        }
    }
    checks
}
