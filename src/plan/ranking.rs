//! The selection's ranking as plain data, the choice from it and its explanation: pure
//! functions of `status.selection`, so the same status always explains the same choice.
//!
//! Lower objective is better (memory, latency, queue time, CPU per request, a custom query all
//! measure a cost). Ties, and differences that are not significant, go to the cheaper config:
//! fewer workers × threads (Falcon: workers), which needs less memory and fewer DB
//! connections for the same work.

use crate::analysis::{candidate_config, mann_whitney_greater};
use crate::api::{
    ObjectiveMetric, RankEntry, RenderedServer, SelectionVariant, ServerConfig, ServerKind, Verdict,
};

/// Samples per variant before Mann-Whitney decides significance; with fewer only the
/// tolerance does.
pub const MIN_SAMPLES: usize = 3;

/// workers × threads (Falcon: workers); `None` for `custom` or an unknown count.
pub fn cost(config: &RenderedServer) -> Option<i32> {
    let workers = config.workers?;
    match config.server {
        ServerKind::Puma => Some(workers * config.threads?),
        ServerKind::Falcon => Some(workers),
        ServerKind::Custom => None,
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Survivors with a measured objective best first (objective, then cost, then spec order),
/// then survivors never measured, then the eliminated in the order they left.
pub fn rank(
    candidates: &[ServerConfig],
    baseline: Option<&RenderedServer>,
    variants: &[SelectionVariant],
) -> Vec<RankEntry> {
    let mut entries: Vec<(RankEntry, u8, Option<String>)> = variants
        .iter()
        .filter_map(|v| {
            let spec = candidates.get(usize::try_from(v.index).ok()?)?;
            let config = candidate_config(spec, baseline);
            let objective = mean(&v.objective_samples);
            let (verdict, group, reason, left) = match (&v.eliminated, objective) {
                (Some(e), _) => (
                    Verdict::Fail,
                    2,
                    Some(e.message.clone()),
                    Some(e.at.0.to_string()),
                ),
                (None, Some(_)) => (Verdict::Pass, 0, None, None),
                (None, None) => (
                    Verdict::Inconclusive,
                    1,
                    Some("no passed analysis measured its objective".into()),
                    None,
                ),
            };
            let entry = RankEntry {
                index: v.index,
                summary: config.summary(),
                cost: cost(&config),
                config,
                objective,
                headroom: v.headroom,
                verdict,
                reason,
            };
            Some((entry, group, left))
        })
        .collect();
    entries.sort_by(|(a, ga, la), (b, gb, lb)| {
        ga.cmp(gb)
            .then_with(|| match (a.objective, b.objective) {
                (Some(x), Some(y)) if *ga == 0 => x.total_cmp(&y),
                _ => std::cmp::Ordering::Equal,
            })
            // Unknown cost (custom) after every known one.
            .then_with(|| {
                let c = |e: &RankEntry| e.cost.unwrap_or(i32::MAX);
                if *ga == 0 {
                    c(a).cmp(&c(b))
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| la.cmp(lb))
            .then_with(|| a.index.cmp(&b.index))
    });
    entries.into_iter().map(|(e, _, _)| e).collect()
}

/// How the winner was told apart from the runner-up.
#[derive(Clone, Debug, PartialEq)]
pub enum Margin {
    /// The only survivor with a measured objective.
    Alone,
    /// Better by more than the tolerance (and by Mann-Whitney when both have enough samples).
    Significant { relative: f64, p_value: Option<f64> },
    /// Within the tolerance, or Mann-Whitney found no difference: the cheaper config won.
    NotSignificant { relative: f64, p_value: Option<f64> },
}

/// The choice: the winner (index into `spec.candidates`), the runner-up, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub winner: i32,
    pub runner_up: Option<i32>,
    pub margin: Margin,
}

/// (runner − best) / |best|; 0 for two zeros, infinite above a zero best.
fn relative(best: f64, runner: f64) -> f64 {
    let d = runner - best;
    if best == 0.0 {
        if d == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        d / best.abs()
    }
}

/// Picks the winner from a ranking: `None` when no survivor was measured. `samples(index)`
/// gives a candidate's per-interval objective values.
pub fn choose<'s>(
    ranking: &[RankEntry],
    tolerance: f64,
    alpha: f64,
    samples: impl Fn(i32) -> &'s [f64],
) -> Option<Choice> {
    let mut ranked = ranking.iter().filter(|e| e.verdict == Verdict::Pass);
    let best = ranked.next()?;
    let Some(runner) = ranked.next() else {
        return Some(Choice {
            winner: best.index,
            runner_up: None,
            margin: Margin::Alone,
        });
    };
    let (b, r) = (best.objective?, runner.objective?);
    let rel = relative(b, r);
    let (sb, sr) = (samples(best.index), samples(runner.index));
    let p_value = (sb.len() >= MIN_SAMPLES && sr.len() >= MIN_SAMPLES)
        .then(|| mann_whitney_greater(sb, sr).map(|(_, p, _)| p))
        .flatten();
    let significant = rel > tolerance && p_value.is_none_or(|p| p < alpha);
    if significant {
        return Some(Choice {
            winner: best.index,
            runner_up: Some(runner.index),
            margin: Margin::Significant {
                relative: rel,
                p_value,
            },
        });
    }
    let cheaper = |e: &RankEntry| e.cost.unwrap_or(i32::MAX);
    let (winner, runner_up) = if cheaper(runner) < cheaper(best) {
        (runner, best)
    } else {
        (best, runner)
    };
    Some(Choice {
        winner: winner.index,
        runner_up: Some(runner_up.index),
        margin: Margin::NotSignificant {
            relative: rel,
            p_value,
        },
    })
}

/// A value of the objective for people: MiB, ms, ms of CPU per request, or as measured.
pub fn show(metric: ObjectiveMetric, v: f64) -> String {
    match metric {
        ObjectiveMetric::Memory => format!("{:.0} MiB", v / 1024.0 / 1024.0),
        ObjectiveMetric::Latency | ObjectiveMetric::QueueTime => format!("{:.1} ms", v * 1e3),
        ObjectiveMetric::Cpu => format!("{:.2} ms CPU per request", v * 1e3),
        ObjectiveMetric::Custom => format!("{v:.4}"),
    }
}

/// The decision message: the winner and the runner-up with the margin, and whether it was
/// significant.
pub fn explain(
    ranking: &[RankEntry],
    choice: &Choice,
    metric: ObjectiveMetric,
    tolerance: f64,
    alpha: f64,
) -> String {
    let find = |i: i32| ranking.iter().find(|e| e.index == i);
    let Some(w) = find(choice.winner) else {
        return String::new();
    };
    let value = |e: &RankEntry| e.objective.map_or("?".into(), |v| show(metric, v));
    let name = metric.as_str();
    let eliminated = ranking
        .iter()
        .filter(|e| e.verdict == Verdict::Fail)
        .count();
    let Some(r) = choice.runner_up.and_then(find) else {
        return format!(
            "Chose {} ({name} {}): the only candidate left of {} ({eliminated} eliminated).",
            w.summary,
            value(w),
            ranking.len()
        );
    };
    let p = |p: &Option<f64>| match p {
        Some(p) => format!(", Mann-Whitney p = {p:.3}"),
        None => String::new(),
    };
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    match &choice.margin {
        Margin::Significant { relative, p_value } => format!(
            "Chose {} ({name} {}) over the runner-up {} ({}): {} lower, beyond the tolerance \
             of {}{}{}.",
            w.summary,
            value(w),
            r.summary,
            value(r),
            pct(*relative),
            pct(tolerance),
            p(p_value),
            if p_value.is_some() {
                format!(" < {alpha}")
            } else {
                String::new()
            }
        ),
        Margin::NotSignificant { relative, p_value } => format!(
            "Chose {} ({name} {}, {} workers × threads) over the runner-up {} ({}, {}): {} \
             apart is not significant (tolerance {}{}), so the cheaper config wins.",
            w.summary,
            value(w),
            w.cost.map_or("?".into(), |c| c.to_string()),
            r.summary,
            value(r),
            r.cost.map_or("?".into(), |c| c.to_string()),
            pct(*relative),
            pct(tolerance),
            p(p_value)
        ),
        Margin::Alone => format!("Chose {} ({name} {}).", w.summary, value(w)),
    }
}
