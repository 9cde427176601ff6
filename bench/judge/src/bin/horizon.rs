//! `horizon`: how many requests the sequential judge needs, against a fixed-horizon test at the
//! same error rate (issue 30). For each quantile check with a `maxIncrease` in a manifest, and
//! each trace:
//!
//! - the operator's `judge: sequential` replayed (as `judge-bench` does): how often it rolled
//!   back and the requests per variant it had then;
//! - the fixed-horizon test (`fixed.rs`) at the planned sample size: the requests per variant a
//!   power analysis on the trace's own baseline plans to catch a regression of ×1.5 (or ×2) at
//!   the check's quantile 95 % of the time — the number a team fixes in advance, whatever the
//!   regression turns out to be;
//! - the oracle: the fewest requests at which the fixed test, looked at once, rejects 95 % of
//!   this trace's replays (a fixed horizon chosen knowing the regression, which no one can).
//!
//! A/A traces check the fixed test's level: how often it rejects at the planned size.

use std::path::PathBuf;

use clap::Parser;
use concurrency_operator::analysis::sequential::{per_test_alpha, Buckets};
use concurrency_operator::analysis::{judge::QUEUE_TIME_FLOOR, sequential_bounds};
use concurrency_operator::api::BuiltinMetric;
use judge_bench::bootstrap::{resample, Rng};
use judge_bench::fixed::{critical, rejects, Design, Shape};
use judge_bench::manifest::{load_spec, Judged, Plan};
use judge_bench::replay::{buckets, run, Outcome, Rule};
use judge_bench::trace::{histogram_quantile, Interval, Trace};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "bench/judge/traces")]
    traces: PathBuf,
    /// Experiments replayed per trace.
    #[arg(long, default_value_t = 200)]
    replays: usize,
    /// Consecutive analysis intervals per bootstrap block.
    #[arg(long, default_value_t = 5)]
    block: usize,
    /// The experiment's false-rollback rate (both judges).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Simulated experiments per sample size in the power analysis.
    #[arg(long, default_value_t = 200)]
    draws: usize,
    /// Regressions the fixed horizon is planned for, as the ratio the check reads.
    #[arg(long, value_delimiter = ',', default_values_t = [1.5, 2.0])]
    plan: Vec<f64>,
    #[arg(default_value = "bench/judge/manifests/queue-5s.yaml")]
    manifest: String,
}

/// One quantile check's fixed test: what it compares and how the trace's histograms feed it.
struct Tested<'a> {
    judged: &'a Judged,
    p: f64,
    ratio: f64,
    queue: bool,
}

impl Tested<'_> {
    fn name(&self) -> String {
        format!("{} p{}", self.judged.check.display_name(), self.p * 100.0)
    }

    fn floor(&self) -> Option<f64> {
        self.queue.then_some(QUEUE_TIME_FLOOR)
    }

    /// Both variants' buckets over `i` (baseline floored, as the judges read it).
    fn buckets(&self, trace: &Trace, b: &Interval, c: &Interval) -> (Buckets, Buckets) {
        let (bounds, bb, cc) = if self.queue {
            (&trace.queue_bounds, &b.queue, &c.queue)
        } else {
            (&trace.latency_bounds, &b.latency, &c.latency)
        };
        let base = buckets(bounds, bb);
        let base = self
            .floor()
            .map_or_else(|| base.clone(), |f| base.floored(f));
        (base, buckets(bounds, cc))
    }

    /// The ratio candidate / baseline at the quantile over `b`, `c`, as the check reads it.
    fn effect(&self, trace: &Trace, b: &Interval, c: &Interval) -> Option<f64> {
        let (bounds, bb, cc) = if self.queue {
            (&trace.queue_bounds, &b.queue, &c.queue)
        } else {
            (&trace.latency_bounds, &b.latency, &c.latency)
        };
        let qb = histogram_quantile(self.p, bounds, bb)?;
        let qc = histogram_quantile(self.p, bounds, cc)?;
        let (qb, qc) = self.floor().map_or((qb, qc), |f| (qb.max(f), qc.max(f)));
        (qb > 0.0).then(|| qc / qb)
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let traces = Trace::load_dir(&args.traces)?;
    let spec = load_spec(args.manifest.as_ref())?;
    let plan = Plan::from_spec(&args.manifest, &spec)?;
    let sequential: Vec<_> = plan
        .checks
        .iter()
        .filter_map(|j| sequential_bounds(&j.check, &j.limits))
        .collect();
    let tests: usize = sequential.iter().map(|b| b.tests()).sum();
    let alpha_seq = per_test_alpha(args.alpha, tests, plan.analyses.len());
    let alpha_fixed = args.alpha / tests.max(1) as f64;
    let tested: Vec<Tested> = plan
        .checks
        .iter()
        .filter_map(|j| {
            let metric = j.check.metric?;
            let quantile = matches!(metric, BuiltinMetric::Latency | BuiltinMetric::QueueTime);
            let ratio = sequential_bounds(&j.check, &j.limits)?.ratio?;
            quantile.then(|| Tested {
                judged: j,
                p: j.check.quantile.unwrap_or(0.99),
                ratio,
                queue: metric == BuiltinMetric::QueueTime,
            })
        })
        .collect();
    println!(
        "## {}: {} analyses of {} s; {} tests at a false-rollback rate of {}: sequential α {:.4} per test (over tests and stages), fixed horizon α {:.4} per test (one look; z {:.2} per arm)\n",
        args.manifest,
        plan.total_analyses(),
        plan.interval_seconds,
        tests,
        args.alpha,
        alpha_seq,
        alpha_fixed,
        critical(alpha_fixed / 2.0)
    );
    let plans: Vec<String> = args
        .plan
        .iter()
        .map(|f| format!("fixed, planned for ×{f}"))
        .collect();
    println!(
        "| check | trace | ratio at the check's quantile | sequential: rolled back on this check | requests per variant then (median) | {} | fixed, oracle (95 % of replays) | planned ×{} ÷ sequential |",
        plans.join(" | "),
        args.plan.first().copied().unwrap_or(1.5)
    );
    println!("|{}", " --- |".repeat(7 + plans.len()));
    // Each trace's replays and the sequential judge's outcomes on them, once for all checks.
    // Staged traces are left out: a fixed horizon is planned for both variants at one rate.
    let replayed: Vec<Replayed> = traces
        .iter()
        .filter(|trace| trace.stages.is_empty())
        .map(|trace| {
            let mut rng = Rng(0x5EED ^ trace.name.len() as u64);
            let draws: Vec<_> = (0..args.replays)
                .filter_map(|_| resample(trace, &plan, args.block, &mut rng))
                .collect();
            let outcomes = draws
                .iter()
                .map(|r| run(&plan, Rule::Sequential { alpha: args.alpha }, trace, r))
                .collect();
            let replays = draws
                .iter()
                .filter_map(|d| d.unstaged().map(<[_]>::to_vec))
                .collect();
            Replayed {
                trace,
                replays,
                outcomes,
                rng,
            }
        })
        .collect();
    for t in &tested {
        for r in &replayed {
            row(&args, t, r, alpha_fixed);
        }
    }
    Ok(())
}

/// One trace's replays, judged sequentially as whole experiments.
struct Replayed<'a> {
    trace: &'a Trace,
    replays: Vec<Vec<(Interval, Interval)>>,
    outcomes: Vec<Outcome>,
    rng: Rng,
}

fn row(args: &Args, t: &Tested, r: &Replayed, alpha: f64) {
    let (trace, replays, outcomes) = (r.trace, &r.replays, &r.outcomes);
    if replays.is_empty() {
        return;
    }
    let mut rng = Rng(r.rng.0 ^ t.p.to_bits());
    let whole = (
        trace.baseline.interval(0, trace.steps()),
        trace.candidate.interval(0, trace.steps()),
    );
    let effect = t.effect(trace, &whole.0, &whole.1);
    // The sequential judge's rollbacks this check decided (among others, at the same analysis).
    let name = t.judged.check.display_name();
    let mut at: Vec<f64> = outcomes
        .iter()
        .filter(|o| o.rolled_back_at.is_some() && o.why.contains(&name))
        .map(|o| o.requests)
        .collect();
    at.sort_by(f64::total_cmp);
    let median = at.get(at.len() / 2).copied();
    // The power analysis on the trace's own baseline, the regression as the check reads it.
    let (base, _) = t.buckets(trace, &whole.0, &whole.1);
    let raw = Shape::of(&if t.queue {
        buckets(&trace.queue_bounds, &whole.0.queue)
    } else {
        buckets(&trace.latency_bounds, &whole.0.latency)
    });
    let read = histogram_quantile(t.p, &base.bounds, &with_total(&base));
    let mut planned = Vec::new();
    for f in &args.plan {
        let design = Design {
            p: t.p,
            ratio: t.ratio,
            alpha,
            power: 0.95,
            floor: t.floor(),
            draws: args.draws,
        };
        // Queue time: the baseline as read is the floor, the candidate slowed until its
        // quantile reads ×f that.
        let n = read
            .and_then(|read| raw.slowed_to(t.p, f * read))
            .and_then(|candidate| design.requests(&raw, &candidate, &mut rng));
        planned.push(n);
    }
    let beyond = effect.is_some_and(|e| e > t.ratio);
    let oracle = if trace.regression.is_some() && !beyond {
        "– (within the tolerance)".to_string()
    } else if trace.regression.is_some() {
        oracle(t, trace, replays, alpha)
            .map_or("not within the replay".into(), |n| format!("{n:.0}"))
    } else {
        // A/A: the fixed test's level at the first planned size.
        match planned.first().copied().flatten() {
            Some(n) => {
                let rejected = replays
                    .iter()
                    .filter(|r| {
                        first_requests(t, trace, r, n as f64)
                            .is_some_and(|(b, c)| rejects(t.p, &b, &c, t.ratio, alpha))
                    })
                    .count();
                format!(
                    "A/A at the ×{} size: {rejected}/{} rejected",
                    args.plan[0],
                    replays.len()
                )
            }
            None => "–".into(),
        }
    };
    let ratio = match (planned.first().copied().flatten(), median) {
        (Some(n), Some(m)) if beyond && m > 0.0 => format!("{:.1}×", n as f64 / m),
        _ => "–".into(),
    };
    println!(
        "| {} | {} | {} | {}/{} | {} | {} | {oracle} | {ratio} |",
        t.name(),
        trace.name,
        effect.map_or("–".into(), |e| format!("×{e:.2}")),
        at.len(),
        outcomes.len(),
        median.map_or("–".into(), |m| format!("{m:.0}")),
        planned
            .iter()
            .map(|n| n.map_or("over 1,000,000".into(), |n| n.to_string()))
            .collect::<Vec<_>>()
            .join(" | "),
    );
}

/// Cumulative counts with the total last, as `histogram_quantile` takes them.
fn with_total(b: &Buckets) -> Vec<f64> {
    let mut c = b.cumulative.clone();
    c.push(b.total);
    c
}

/// Both variants' buckets over a replay's first analyses, once each has `n` requests.
fn first_requests(
    t: &Tested,
    trace: &Trace,
    replay: &[(Interval, Interval)],
    n: f64,
) -> Option<(Buckets, Buckets)> {
    let (mut b, mut c) = (Interval::default(), Interval::default());
    for (bi, ci) in replay {
        b.add(bi);
        c.add(ci);
        if b.requests.min(c.requests) >= n {
            return Some(t.buckets(trace, &b, &c));
        }
    }
    None
}

/// The fewest requests per variant (at analysis boundaries) at which the fixed test, looked at
/// once, rejects at least 95 % of the replays.
fn oracle(
    t: &Tested,
    trace: &Trace,
    replays: &[Vec<(Interval, Interval)>],
    alpha: f64,
) -> Option<f64> {
    let looks = replays.iter().map(Vec::len).min()?;
    for k in 1..=looks {
        let mut requests = Vec::with_capacity(replays.len());
        let mut rejected = 0;
        for r in replays {
            let (mut b, mut c) = (Interval::default(), Interval::default());
            for (bi, ci) in &r[..k] {
                b.add(bi);
                c.add(ci);
            }
            requests.push(b.requests.min(c.requests));
            let (bb, cc) = t.buckets(trace, &b, &c);
            if rejects(t.p, &bb, &cc, t.ratio, alpha) {
                rejected += 1;
            }
        }
        if rejected as f64 >= 0.95 * replays.len() as f64 {
            requests.sort_by(f64::total_cmp);
            return requests.get(requests.len() / 2).copied();
        }
    }
    None
}
