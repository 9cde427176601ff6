//! `queueTime` and the load balancer's header, said plainly:
//! - without `X-Request-Start`: the queue-time histogram is only written for requests that
//!   carry the header, so no value while the candidate served requests means the header never
//!   arrived — said so, with what to do, instead of "no value" (which reads as "no traffic");
//! - with a one-second clock (ALB's `X-Amzn-Trace-Id`, an integer `X-Request-Start`): each
//!   request's arrival is stamped with its whole second, so every queue time is the real one
//!   plus the arrival's fraction of a second — uniform over 0–1 s. The histogram then reads
//!   about 10 % at or under 100 ms, 50 % at or under 500 ms, all by 1 s, which no real queue
//!   looks like; differences of a few milliseconds vanish in it. Told from the buckets.

use jiff::Timestamp;

use crate::api::{BuiltinMetric, Check, CheckResult, MetricNames, Verdict};

use super::anytime::parse_buckets;
use super::queries::bucket_increase_template;
use super::sequential::Buckets;
use super::source::MetricSource;
use super::template::{render, TemplateVars};

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

/// Fewest queue times before the shape is judged: below it a uniform look is chance.
pub const CLOCK_MIN_REQUESTS: f64 = 100.0;

/// A queue-time histogram that looks like a one-second clock: the share of requests at or under
/// some of its bounds, and how many requests it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct CoarseClock {
    pub requests: f64,
    /// `(bound in seconds, share at or under it)`, for the bounds nearest 100 ms, 500 ms, 1 s.
    pub shares: Vec<(f64, f64)>,
}

impl CoarseClock {
    fn shares(&self) -> Vec<String> {
        self.shares
            .iter()
            .map(|(le, s)| format!("{:.0} % ≤ {}", s * 100.0, seconds(*le)))
            .collect()
    }

    /// For a check's reason, which status keeps to 160 bytes: first, so it is never the part
    /// cut (the Event and `status.preflight` have the whole sentence).
    pub fn short(&self) -> String {
        format!(
            "one-second clock ({}): judge backlog instead",
            self.shares()[..self.shares.len().min(2)].join(", ")
        )
    }

    /// What it means and what to do, for an Event, `status.preflight` and `init`.
    pub fn describe(&self) -> String {
        let shares = self.shares();
        format!(
            "queue time looks like a one-second clock ({} of {:.0} requests): the load \
             balancer stamps arrivals in whole seconds (ALB's X-Amzn-Trace-Id, an integer \
             X-Request-Start), which adds 0–1 s to every request, so differences under a \
             second cannot be seen — stamp X-Request-Start in milliseconds \
             (docs/experiment-reference.md, \"queueTime\"), or judge waiting with backlog or \
             threadUtilization (Puma's own stats)",
            shares.join(", "),
            self.requests
        )
    }
}

fn seconds(le: f64) -> String {
    if le < 1.0 {
        format!("{:.0} ms", le * 1000.0)
    } else {
        format!("{le} s")
    }
}

/// Whether `b` (queue times, in seconds) looks like a one-second clock: enough requests, and at
/// every bound between 50 ms and 950 ms the share at or under it is the bound itself (a
/// uniform 0–1 s) within a Kolmogorov–Smirnov margin plus 5 points for real queueing and clock
/// skew, at least one of those bounds between 200 ms and 800 ms (else an app that is simply
/// slow matches), and — where a bound of 1–1.5 s exists — at least 90 % under it (a queue that
/// grew past a second, exponential-like, is real waiting, not the clock).
pub fn one_second_clock(b: &Buckets) -> Option<CoarseClock> {
    let n = b.total;
    // NaN counts as too few.
    if n.is_nan() || n < CLOCK_MIN_REQUESTS {
        return None;
    }
    let share = |i: usize| b.cumulative[i] / n;
    let margin = 0.05 + 1.36 / n.sqrt();
    let inside: Vec<usize> = (0..b.bounds.len())
        .filter(|&i| (0.05..=0.95).contains(&b.bounds[i]))
        .collect();
    let middle = inside.iter().any(|&i| (0.2..=0.8).contains(&b.bounds[i]));
    if inside.len() < 2 || !middle {
        return None;
    }
    if inside
        .iter()
        .any(|&i| (share(i) - b.bounds[i]).abs() > margin)
    {
        return None;
    }
    let second = (0..b.bounds.len()).find(|&i| (1.0..=1.5).contains(&b.bounds[i]));
    if second.is_some_and(|i| share(i) < 0.9) {
        return None;
    }
    let nearest = |x: f64| {
        (0..b.bounds.len())
            .filter(|&i| b.bounds[i] >= 0.05 && b.bounds[i] <= 1.5)
            .min_by(|&i, &j| (b.bounds[i] - x).abs().total_cmp(&(b.bounds[j] - x).abs()))
    };
    let mut picked: Vec<usize> = [0.1, 0.5, 1.0].into_iter().filter_map(nearest).collect();
    picked.dedup();
    Some(CoarseClock {
        requests: n,
        shares: picked
            .into_iter()
            .map(|i| (b.bounds[i], share(i)))
            .collect(),
    })
}

/// Reads the queue-time buckets of the pods `vars` selects over its `{{window}}` and judges
/// their shape. `None` without a queue-time histogram, a bucket answer, or a one-second look.
pub async fn read_clock(
    source: &impl MetricSource,
    names: &MetricNames,
    vars: &TemplateVars,
    at: Timestamp,
) -> Option<CoarseClock> {
    let template = bucket_increase_template(BuiltinMetric::QueueTime, names)?.ok()?;
    let query = render("queueTime", &template, vars).ok()?;
    let pairs = source.query_by_label(&query, at, "le").await.ok()?;
    one_second_clock(&parse_buckets(&pairs)?)
}

/// The built-in `queueTime` check (the only one the clock matters to; a custom query reads
/// whatever it reads).
fn is_queue_time(c: &Check) -> bool {
    c.metric == Some(BuiltinMetric::QueueTime) && c.query.is_none()
}

/// Whether the spec judges the built-in `queueTime`.
pub fn judges_queue_time(specs: &[Check]) -> bool {
    specs.iter().any(is_queue_time)
}

/// Puts the one-second clock before the reason of each built-in `queueTime` check: its verdict
/// stands (a regression of a second still shows), but a Pass is no evidence of small ones.
pub fn note_coarse_clock(
    specs: &[Check],
    mut checks: Vec<CheckResult>,
    clock: Option<&CoarseClock>,
) -> Vec<CheckResult> {
    let Some(clock) = clock else {
        return checks;
    };
    for (spec, r) in specs.iter().zip(checks.iter_mut()) {
        if is_queue_time(spec) {
            let note = clock.short();
            r.reason = Some(match r.reason.take() {
                Some(why) if !why.is_empty() => format!("{note}; {why}"),
                _ => note,
            });
        }
    }
    checks
}
