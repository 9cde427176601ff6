//! One check's verdict from its anytime-valid tests (`judge: sequential`): the stage's
//! requests so far against the check's `max` and `maxIncrease`. Fail only when the evidence
//! shows the candidate beyond a limit; Pass otherwise, with "no worse" once it shows the
//! candidate within all of them; Inconclusive ("needs N more requests") while no bound can
//! exist yet — never a Pass on too little data.

use crate::api::{Evidence, Shown, Verdict};

use super::quantile::{Buckets, Direction, QuantileTest};
use super::rate::{self, Counts};

/// Requests per variant at which the tests are tuned to be most powerful: about what a stage
/// of a few minutes brings a modest app. Decisions far from it cost a little power, never
/// validity.
pub const N_OPT: f64 = 1000.0;

/// What a check is tested against (base units).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// `maxIncrease` as a ratio: 1.1 for 10 %.
    pub ratio: Option<f64>,
    pub max: Option<f64>,
}

impl Bounds {
    /// How many tests the check runs: its share of the error budget.
    pub fn tests(&self) -> usize {
        usize::from(self.ratio.is_some()) + usize::from(self.max.is_some())
    }
}

/// What the stage has brought so far, per variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// A quantile `p` of a histogram. `floor`: baseline values up to it count as it (queue
    /// time). No baseline: only `max` can be tested.
    Quantile {
        p: f64,
        baseline: Option<Buckets>,
        candidate: Buckets,
        floor: Option<f64>,
    },
    /// Requests and 5xx; `baseline_*` are zero when the baseline has none to compare.
    Errors(Counts),
}

/// The level of each test: the experiment's false-rollback rate split evenly over its tests
/// and stages (a union bound: each stage's tests look at that stage's requests).
pub fn per_test_alpha(rate: f64, tests: usize, stages: usize) -> f64 {
    rate / (tests.max(1) * stages.max(1)) as f64
}

/// The check's verdict, its reason (values shown with `show`) and its evidence for status.
pub fn decide(
    data: &Data,
    bounds: Bounds,
    alpha: f64,
    show: impl Fn(f64) -> String,
) -> (Verdict, String, Evidence) {
    let level = Level {
        alpha,
        threshold: (1.0 / alpha).ln(),
        text: format!("at {}", percent(alpha)),
    };
    match data {
        Data::Quantile {
            p,
            baseline,
            candidate,
            floor,
        } => {
            let test = QuantileTest::new(*p, N_OPT);
            let baseline = match (baseline, floor) {
                (Some(b), Some(f)) => Some(b.floored(*f)),
                (b, _) => b.clone(),
            };
            quantile(&test, baseline.as_ref(), candidate, bounds, &level, show)
        }
        Data::Errors(counts) => errors(counts, bounds, &level, show),
    }
}

/// One test's level: α, the `ln(1/α)` its evidence must reach, and how a reason says it.
struct Level {
    alpha: f64,
    threshold: f64,
    text: String,
}

/// Evidence before any test has shown anything: `waiting`, with the requests so far.
fn waiting(candidate: f64, baseline: Option<f64>) -> Evidence {
    Evidence {
        shown: Shown::Waiting,
        ratio_above: None,
        ratio_within: None,
        candidate_requests: candidate.round(),
        baseline_requests: baseline.map(f64::round),
        needs_requests: None,
    }
}

fn percent(share: f64) -> String {
    let v = share * 100.0;
    let s = if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

fn quantile(
    test: &QuantileTest,
    baseline: Option<&Buckets>,
    candidate: &Buckets,
    bounds: Bounds,
    level: &Level,
    show: impl Fn(f64) -> String,
) -> (Verdict, String, Evidence) {
    let Level {
        alpha,
        threshold,
        text: ref level,
    } = *level;
    let q = format!("p{}", trim_quantile(test.p));
    let needed = test.minimum_requests(alpha, Direction::Worse);
    let (nc, nb) = (candidate.total, baseline.map(|b| b.total));
    let mut evidence = waiting(nc, nb);
    let ratio_baseline = bounds.ratio.map(|r| (r, baseline));
    if let Some((_, None)) = ratio_baseline {
        if bounds.max.is_none() {
            let why = format!("no baseline requests to compare {q} with (maxIncrease)");
            return (Verdict::Inconclusive, why, evidence);
        }
    }
    let fewest = match ratio_baseline {
        Some((_, Some(b))) => nc.min(b.total),
        _ => nc,
    };
    if fewest < needed {
        let more = (needed - fewest).ceil();
        evidence.needs_requests = Some(more);
        let why = format!(
            "needs {more} more requests per variant: {q} shows nothing {level} before {needed} \
             (candidate {}, baseline {} in the stage)",
            nc.round(),
            nb.map(|n| n.round().to_string())
                .unwrap_or_else(|| "none".into())
        );
        return (Verdict::Inconclusive, why, evidence);
    }
    let mut worse = Vec::new();
    let mut within = Vec::new();
    let mut open = Vec::new();
    if let Some((ratio, Some(b))) = ratio_baseline {
        let shown = test.ratio_bounds(b, candidate, alpha);
        evidence.ratio_above = shown.lower;
        evidence.ratio_within = shown.upper;
        let tolerance = format!("×{}", trim(ratio, 3));
        if test.log_evidence(b, candidate, ratio, Direction::Worse) >= threshold {
            worse.push(format!(
                "candidate/baseline {q} is shown above ×{} (maxIncrease allows {tolerance})",
                trim(shown.lower.unwrap_or(ratio), 3)
            ));
        } else if test.log_evidence(b, candidate, ratio, Direction::NoWorse) >= threshold {
            within.push(format!(
                "candidate/baseline {q} is shown within ×{} (≤ {tolerance})",
                trim(shown.upper.unwrap_or(ratio), 3)
            ));
        } else {
            open.push(format!(
                "candidate/baseline {q} is not yet shown above or within {tolerance}{}",
                describe_interval(shown.lower, shown.upper)
            ));
        }
    }
    if let Some(max) = bounds.max {
        if test.log_evidence_above(candidate, max) >= threshold {
            worse.push(format!(
                "the candidate's {q} is shown above max {}",
                show(max)
            ));
        } else if test.log_evidence_below(candidate, max) >= threshold {
            within.push(format!("its {q} is shown within max {}", show(max)));
        } else {
            open.push(format!(
                "its {q} is not yet shown above or within max {}",
                show(max)
            ));
        }
    }
    let requests = format!(
        "{} requests per variant in the stage, {level}",
        fewest.round()
    );
    finish(worse, within, open, requests, evidence)
}

fn errors(
    counts: &Counts,
    bounds: Bounds,
    level: &Level,
    show: impl Fn(f64) -> String,
) -> (Verdict, String, Evidence) {
    let Level {
        alpha,
        threshold,
        text: ref level,
    } = *level;
    let has_baseline = counts.baseline_requests > 0.0;
    let mut evidence = waiting(
        counts.candidate_requests,
        has_baseline.then_some(counts.baseline_requests),
    );
    if counts.candidate_requests.is_nan() || counts.candidate_requests <= 0.0 {
        return (
            Verdict::Inconclusive,
            "no candidate requests in the stage yet".into(),
            evidence,
        );
    }
    if bounds.ratio.is_some() && !has_baseline && bounds.max.is_none() {
        let why = "no baseline requests to compare the error rate with (maxIncrease)".into();
        return (Verdict::Inconclusive, why, evidence);
    }
    let (mut worse, mut within, mut open) = (Vec::new(), Vec::new(), Vec::new());
    let rates = format!(
        "errors {} of {} (candidate){}",
        counts.candidate_errors.round(),
        counts.candidate_requests.round(),
        if has_baseline {
            format!(
                ", {} of {} (baseline)",
                counts.baseline_errors.round(),
                counts.baseline_requests.round()
            )
        } else {
            String::new()
        }
    );
    if let (Some(ratio), true) = (bounds.ratio, has_baseline) {
        let one = [*counts];
        let shown = rate::ratio_bounds(&one, alpha);
        evidence.ratio_above = shown.lower;
        evidence.ratio_within = shown.upper;
        let tolerance = format!("×{}", trim(ratio, 3));
        if rate::log_evidence(&one, ratio, Direction::Worse) >= threshold {
            worse.push(format!(
                "the candidate's error rate is shown above ×{} the baseline's (maxIncrease allows {tolerance})",
                trim(shown.lower.unwrap_or(ratio), 3)
            ));
        } else if rate::log_evidence(&one, ratio, Direction::NoWorse) >= threshold {
            within.push(format!(
                "its error rate is shown within {tolerance} the baseline's"
            ));
        } else {
            open.push(format!(
                "its error rate is not yet shown above or within {tolerance} the baseline's{}",
                describe_interval(shown.lower, shown.upper)
            ));
        }
    }
    if let Some(max) = bounds.max {
        let (n, k) = (counts.candidate_requests, counts.candidate_errors);
        if rate::log_evidence_above(n, k, max, N_OPT) >= threshold {
            worse.push(format!(
                "the candidate's error rate is shown above max {}",
                show(max)
            ));
        } else if rate::log_evidence_below(n, k, max, N_OPT) >= threshold {
            within.push(format!("its error rate is shown within max {}", show(max)));
        } else {
            open.push(format!(
                "its error rate is not yet shown above or within max {}",
                show(max)
            ));
        }
    }
    finish(worse, within, open, format!("{rates}, {level}"), evidence)
}

/// Worse on any test fails; no worse on all of them ends the stage early; else open.
fn finish(
    worse: Vec<String>,
    within: Vec<String>,
    open: Vec<String>,
    data: String,
    mut evidence: Evidence,
) -> (Verdict, String, Evidence) {
    if !worse.is_empty() {
        evidence.shown = Shown::Worse;
        return (
            Verdict::Fail,
            format!("{} ({data})", worse.join("; ")),
            evidence,
        );
    }
    evidence.shown = if open.is_empty() {
        Shown::NoWorse
    } else {
        Shown::Open
    };
    let all: Vec<String> = within.into_iter().chain(open).collect();
    (
        Verdict::Pass,
        format!("{} ({data})", all.join("; ")),
        evidence,
    )
}

/// `; so far ×0.91–×1.18` from whatever bounds exist.
fn describe_interval(above: Option<f64>, within: Option<f64>) -> String {
    match (above, within) {
        (Some(a), Some(w)) => format!("; so far between ×{} and ×{}", trim(a, 3), trim(w, 3)),
        (None, Some(w)) => format!("; so far within ×{}", trim(w, 3)),
        (Some(a), None) => format!("; so far above ×{}", trim(a, 3)),
        (None, None) => String::new(),
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn trim_quantile(p: f64) -> String {
    trim(p * 100.0, 2)
}
