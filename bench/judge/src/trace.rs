//! A recorded trace: one baseline and one candidate served the same load side by side, and a
//! real Prometheus scraped both; per step (a few seconds), what each variant's counters grew
//! by and its memory.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trace {
    pub name: String,
    /// What differs between the variants, as a person would say it (`None`: A/A).
    pub regression: Option<String>,
    pub recorded: String,
    pub step_seconds: u32,
    /// Requests per second each variant was sent (with `stages`: both together).
    pub rate: u32,
    pub baseline_env: Vec<(String, String)>,
    pub candidate_env: Vec<(String, String)>,
    /// Finite `le` bounds of the request-duration and queue-time histograms.
    pub latency_bounds: Vec<f64>,
    pub queue_bounds: Vec<f64>,
    pub baseline: Series,
    pub candidate: Series,
    /// Per-stage loads: the recording's stretches, each at one weight (the candidate got that
    /// percentage of `rate`, the baseline the rest). Empty: each variant got `rate` throughout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Segment>,
}

/// Steps `from..to` of a staged recording, when the candidate got `weight` % of the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub weight: i32,
    pub from: usize,
    pub to: usize,
}

/// Per step: increments of the counters, and the memory at the step's end.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    pub requests: Vec<f64>,
    pub errors: Vec<f64>,
    /// Per step, the increments of the cumulative buckets (one per bound, then `+Inf`).
    pub latency: Vec<Vec<f64>>,
    pub queue: Vec<Vec<f64>>,
    pub memory: Vec<f64>,
    /// Increments of the GVL counters (`ruby_running_seconds_total`,
    /// `ruby_io_wait_seconds_total`): what the capacity gate reads. Empty in older traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_wait: Vec<f64>,
}

impl Trace {
    pub fn steps(&self) -> usize {
        [&self.baseline, &self.candidate]
            .iter()
            .map(|s| {
                s.requests
                    .len()
                    .min(s.errors.len())
                    .min(s.latency.len())
                    .min(s.queue.len())
                    .min(s.memory.len())
            })
            .min()
            .unwrap_or(0)
    }

    /// Where a stage at `weight` % draws its analyses from: the stretch recorded at that
    /// weight (else the first above it, else the last), and where its baseline comes from —
    /// the same stretch, or at 100 % the one before it (the operator compares a candidate at
    /// 100 % with the baseline's last stage). `None` for a trace without stages.
    pub fn stretch(&self, weight: i32) -> Option<(Segment, Segment)> {
        let i = self
            .stages
            .iter()
            .position(|s| s.weight == weight)
            .or_else(|| self.stages.iter().position(|s| s.weight >= weight))
            .or_else(|| self.stages.len().checked_sub(1))?;
        let here = *self.stages.get(i)?;
        let baseline = if here.weight >= 100 && i > 0 {
            self.stages[i - 1]
        } else {
            here
        };
        Some((here, baseline))
    }

    pub fn load(path: &std::path::Path) -> anyhow::Result<Trace> {
        let text = std::fs::read_to_string(path)?;
        Ok(serde_json::from_str(&text)?)
    }

    /// Every trace in `dir` (`*.json`), A/A first, then by name; an error when there is none.
    pub fn load_dir(dir: &std::path::Path) -> anyhow::Result<Vec<Trace>> {
        let mut traces: Vec<Trace> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| Trace::load(&p))
            .collect::<anyhow::Result<_>>()?;
        traces.sort_by(|a, b| {
            (a.regression.is_some(), &a.name).cmp(&(b.regression.is_some(), &b.name))
        });
        if traces.is_empty() {
            anyhow::bail!("no traces in {}", dir.display());
        }
        Ok(traces)
    }
}

/// What one variant did over an interval of consecutive steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    pub requests: f64,
    pub errors: f64,
    /// Cumulative bucket counts, `+Inf` last.
    pub latency: Vec<f64>,
    pub queue: Vec<f64>,
    pub memory: f64,
    /// GVL counter seconds (`None`: not recorded).
    pub running: Option<f64>,
    pub io_wait: Option<f64>,
}

impl Series {
    /// Steps `from..to` summed (memory: their mean).
    pub fn interval(&self, from: usize, to: usize) -> Interval {
        let sum = |rows: &[Vec<f64>]| {
            let mut acc: Vec<f64> = Vec::new();
            for row in &rows[from..to] {
                if acc.len() < row.len() {
                    acc.resize(row.len(), 0.0);
                }
                for (a, v) in acc.iter_mut().zip(row) {
                    *a += v;
                }
            }
            acc
        };
        let n = (to - from).max(1) as f64;
        let counter = |v: &[f64]| (v.len() >= to).then(|| v[from..to].iter().sum());
        Interval {
            requests: self.requests[from..to].iter().sum(),
            errors: self.errors[from..to].iter().sum(),
            latency: sum(&self.latency),
            queue: sum(&self.queue),
            memory: self.memory[from..to].iter().sum::<f64>() / n,
            running: counter(&self.running),
            io_wait: counter(&self.io_wait),
        }
    }
}

impl Interval {
    /// Adds another interval's counts (memory: the later one's).
    pub fn add(&mut self, other: &Interval) {
        self.requests += other.requests;
        self.errors += other.errors;
        for (mine, theirs) in [
            (&mut self.latency, &other.latency),
            (&mut self.queue, &other.queue),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0.0);
            }
            for (a, v) in mine.iter_mut().zip(theirs) {
                *a += v;
            }
        }
        self.memory = other.memory;
        let sum = |a: Option<f64>, b: Option<f64>| Some(a.unwrap_or(0.0) + b?);
        self.running = sum(self.running, other.running);
        self.io_wait = sum(self.io_wait, other.io_wait);
    }
}

/// Prometheus's `histogram_quantile` over cumulative counts (`+Inf` last): linear within the
/// bucket the rank falls in, from 0 for the first; the last finite bound for the `+Inf` bucket.
pub fn histogram_quantile(q: f64, bounds: &[f64], cumulative: &[f64]) -> Option<f64> {
    let total = *cumulative.last()?;
    if total <= 0.0 || bounds.is_empty() {
        return None;
    }
    let rank = q * total;
    let j = cumulative.iter().position(|c| *c >= rank)?;
    if j >= bounds.len() {
        return bounds.last().copied();
    }
    let (lower, below) = if j == 0 {
        (0.0f64.min(bounds[0]), 0.0)
    } else {
        (bounds[j - 1], cumulative[j - 1])
    };
    let inside = cumulative[j] - below;
    if inside <= 0.0 {
        return Some(bounds[j]);
    }
    Some(lower + (bounds[j] - lower) * (rank - below) / inside)
}
