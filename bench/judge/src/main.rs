//! `judge-bench`: replays the recorded traces through each manifest's checks, per-interval
//! (the operator today) and anytime-valid, and prints per trace how often the experiment
//! rolled back and how soon. A/A traces give the false-rollback rate; the others the recall.

use std::path::PathBuf;

use clap::Parser;
use concurrency_operator::analysis::sequential::{Direction, QuantileTest};
use judge_bench::bootstrap::{resample, Rng};
use judge_bench::manifest::{load_spec, Plan};
use judge_bench::replay::{run, Outcome, Rule};
use judge_bench::trace::{histogram_quantile, Segment, Trace};

#[derive(Parser)]
struct Args {
    /// Directory of recorded traces (`record` writes them).
    #[arg(long, default_value = "bench/judge/traces")]
    traces: PathBuf,
    /// Experiments replayed per trace and manifest.
    #[arg(long, default_value_t = 400)]
    replays: usize,
    /// Consecutive analysis intervals per bootstrap block.
    #[arg(long, default_value_t = 5)]
    block: usize,
    /// Overall α of the anytime-valid judge.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Manifests (YAML, or Markdown whose first ConcurrencyExperiment block is used); `init`
    /// is what `kubectl concurrency init` writes for a Puma candidate whose series all exist.
    #[arg(default_values_t = ["README.md".to_string()])]
    manifests: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let traces = Trace::load_dir(&args.traces)?;
    let rules = [Rule::PerInterval, Rule::Sequential { alpha: args.alpha }];
    print_traces(&traces);
    println!("Requests per variant before any anytime-valid verdict on a quantile is possible");
    println!(
        "(the most extreme data; α {} split over 3 tests):\n",
        args.alpha
    );
    println!("| quantile | to show a regression | to show none |\n| --- | --- | --- |");
    for p in [0.5, 0.9, 0.95, 0.99] {
        let test = QuantileTest::new(p, 1000.0);
        let alpha = args.alpha / 3.0;
        println!(
            "| p{} | {} | {} |",
            p * 100.0,
            test.minimum_requests(alpha, Direction::Worse),
            test.minimum_requests(alpha, Direction::NoWorse)
        );
    }
    for manifest in &args.manifests {
        let spec = if manifest == "init" {
            init_spec()?
        } else {
            load_spec(manifest.as_ref())?
        };
        let plan = Plan::from_spec(manifest, &spec)?;
        println!(
            "\n## {manifest}: {} analyses of {} s ({} per stage); checks: {}{}",
            plan.total_analyses(),
            plan.interval_seconds,
            plan.analyses
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            plan.checks
                .iter()
                .map(describe)
                .collect::<Vec<_>>()
                .join("; "),
            if plan.skipped.is_empty() {
                String::new()
            } else {
                format!(" (left out: {})", plan.skipped.join(", "))
            }
        );
        println!(
            "\n| trace | what differs | judge | rolled back | of which inconclusive | median analyses to rollback (its stage) | median requests per variant at rollback | deciding checks |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        for rule in rules {
            let mut aa = (0usize, 0usize);
            for trace in &traces {
                let mut rng = Rng(0x5EED ^ trace.name.len() as u64);
                let outcomes: Vec<Outcome> = (0..args.replays)
                    .filter_map(|_| resample(trace, &plan, args.block, &mut rng))
                    .map(|intervals| run(&plan, rule, trace, &intervals))
                    .collect();
                if outcomes.is_empty() {
                    println!(
                        "| {} | trace shorter than one block | | | | | | |",
                        trace.name
                    );
                    continue;
                }
                let rolled: Vec<&Outcome> = outcomes
                    .iter()
                    .filter(|o| o.rolled_back_at.is_some())
                    .collect();
                if trace.regression.is_none() {
                    aa.0 += rolled.len();
                    aa.1 += outcomes.len();
                }
                let inconclusive = rolled.iter().filter(|o| o.inconclusive).count();
                let mut requests: Vec<f64> = rolled.iter().map(|o| o.requests).collect();
                requests.sort_by(f64::total_cmp);
                let mut why: Vec<String> = rolled.iter().flat_map(|o| o.why.clone()).collect();
                why.sort();
                why.dedup();
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    trace.name,
                    trace.regression.as_deref().unwrap_or("nothing (A/A)"),
                    rule.label(),
                    share(rolled.len(), outcomes.len()),
                    inconclusive,
                    median_at(&rolled),
                    requests
                        .get(requests.len() / 2)
                        .map_or("–".into(), |r| format!("{r:.0}")),
                    why.join(", ")
                );
            }
            if aa.1 > 0 {
                println!(
                    "| **all A/A** | | {} | **{}** (95 % interval {}) | | | | |",
                    rule.label(),
                    share(aa.0, aa.1),
                    wilson(aa.0, aa.1)
                );
            }
        }
    }
    Ok(())
}

/// What each trace holds, over its whole length: the truth the judges are scored against.
fn print_traces(traces: &[Trace]) {
    println!("Traces (whole length; baseline → candidate):\n");
    println!("| trace | what differs | steps × s | requests per variant | latency p50 | latency p99 | queue time p90 | errors | memory |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} ms", v * 1000.0));
    for t in traces {
        // A staged trace: a row per stretch, its baseline where the judge takes it from.
        let whole = Segment {
            weight: 100,
            from: 0,
            to: t.steps(),
        };
        let rows: Vec<(String, Segment, Segment)> = if t.stages.is_empty() {
            vec![(t.name.clone(), whole, whole)]
        } else {
            t.stages
                .iter()
                .filter_map(|s| {
                    let (here, before) = t.stretch(s.weight)?;
                    Some((format!("{} at {} %", t.name, s.weight), before, here))
                })
                .collect()
        };
        for (name, before, here) in rows {
            let (b, c) = (
                t.baseline.interval(before.from, before.to),
                t.candidate.interval(here.from, here.to),
            );
            let q = |q: f64, bounds: &[f64], b: &[f64], c: &[f64]| {
                let (qb, qc) = (
                    histogram_quantile(q, bounds, b),
                    histogram_quantile(q, bounds, c),
                );
                let ratio = match (qb, qc) {
                    (Some(x), Some(y)) if x > 0.0 => format!(" (×{:.2})", y / x),
                    _ => String::new(),
                };
                format!("{} → {}{ratio}", ms(qb), ms(qc))
            };
            println!(
                "| {name} | {} | {} × {} | {:.0} | {} | {} | {} | {:.2} % → {:.2} % | {:.1} → {:.1} MiB |",
                t.regression.as_deref().unwrap_or("nothing (A/A)"),
                here.to - here.from,
                t.step_seconds,
                b.requests.min(c.requests),
                q(0.5, &t.latency_bounds, &b.latency, &c.latency),
                q(0.99, &t.latency_bounds, &b.latency, &c.latency),
                q(0.9, &t.queue_bounds, &b.queue, &c.queue),
                100.0 * b.errors / b.requests.max(1.0),
                100.0 * c.errors / c.requests.max(1.0),
                b.memory / 1048576.0,
                c.memory / 1048576.0,
            );
        }
    }
    println!();
}

/// `kubectl concurrency init`'s starter for a Puma candidate with every series present: its
/// own starter checks (`kubectl::init::manifest::starters`), its stages and interval.
fn init_spec() -> anyhow::Result<concurrency_operator::api::ConcurrencyExperimentSpec> {
    use concurrency_operator::kubectl::init::manifest::{check_of, starters};
    let candidate: concurrency_operator::api::ServerConfig =
        serde_json::from_value(serde_json::json!({"server": "puma", "workers": 2, "threads": 4}))?;
    let checks = starters(&candidate)
        .iter()
        .map(check_of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::from_value(serde_json::json!({
        "targetRef": {"name": "storefront"},
        "candidate": candidate,
        "stages": [{"weight": 30, "duration": "10m"}, {"weight": 70, "duration": "10m"}, {"weight": 100, "duration": "10m"}],
        "analysis": {"prometheus": {"url": "http://prometheus.monitoring:9090"}, "interval": "1m",
                     "failureLimit": 1, "inconclusiveLimit": 3, "minRequests": 50, "checks": checks},
    }))?)
}

fn describe(j: &judge_bench::manifest::Judged) -> String {
    let (c, limits) = (&j.check, &j.limits.written);
    match c.quantile {
        Some(q) => format!("{} p{} {limits}", c.display_name(), q * 100.0),
        None => format!("{} {limits}", c.display_name()),
    }
}

/// The median analysis of the rollbacks, and the stage (1-based) it fell in.
fn median_at(rolled: &[&Outcome]) -> String {
    let mut at: Vec<(usize, usize)> = rolled
        .iter()
        .filter_map(|o| Some((o.rolled_back_at?, o.stage + 1)))
        .collect();
    at.sort_unstable();
    at.get(at.len() / 2)
        .map_or("–".into(), |(n, stage)| format!("{n} ({stage})"))
}

fn share(k: usize, n: usize) -> String {
    format!("{k}/{n} ({:.1} %)", 100.0 * k as f64 / n.max(1) as f64)
}

/// The Wilson score interval of a proportion, 95 %.
fn wilson(k: usize, n: usize) -> String {
    let (k, n, z) = (k as f64, n as f64, 1.96f64);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    format!(
        "{:.1}–{:.1} %",
        100.0 * (centre - half).max(0.0),
        100.0 * (centre + half).min(1.0)
    )
}
