//! What a report draws, as plain data: the experiment's time range, which variants ran, and per
//! check and variant the series Prometheus still has. Gathered by `super::gather`; everything
//! here is pure.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::{parse_duration, AnalysisRecord, ConcurrencyExperiment, Verdict};
use crate::workload::{candidate_name, fresh_baseline_name, variant_name};

/// `(unix seconds, value)`, oldest first.
pub type Points = Vec<(f64, f64)>;

/// Most points a series is asked for: enough for a chart 880 pixels wide.
pub const MAX_POINTS: f64 = 600.0;
/// The finest step asked for: the scrape intervals people run are 5 s or more.
const MIN_STEP: Duration = Duration::from_secs(5);

/// Who a series belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    Baseline,
    Candidate,
    /// A selection's candidate: its index in `spec.candidates` and its summary.
    Option(i32, String),
    /// The selection's fresh copy of the target.
    FreshBaseline,
}

impl Variant {
    pub fn label(&self) -> String {
        match self {
            Variant::Baseline => "baseline".into(),
            Variant::Candidate => "candidate".into(),
            Variant::Option(i, summary) => format!("candidate {i}: {summary}"),
            Variant::FreshBaseline => "fresh baseline".into(),
        }
    }

    /// The CSS class that colours it.
    pub fn class(&self) -> String {
        match self {
            Variant::Baseline => "baseline".into(),
            Variant::Candidate => "candidate".into(),
            Variant::Option(i, _) => format!("option-{}", i.rem_euclid(5)),
            Variant::FreshBaseline => "fresh".into(),
        }
    }

    /// As the query renderer names a variant in its errors.
    pub fn role(&self) -> &'static str {
        match self {
            Variant::Baseline | Variant::FreshBaseline => "baseline",
            Variant::Candidate | Variant::Option(..) => "candidate",
        }
    }
}

/// One variant's history of one query.
#[derive(Debug, Clone)]
pub struct Series {
    pub variant: Variant,
    /// The query as sent (empty when it could not be rendered).
    pub query: String,
    /// The points, or why there are none (the query failed or could not be rendered).
    pub points: Result<Points, String>,
}

/// Everything the report draws that comes from Prometheus.
#[derive(Debug, Clone)]
pub struct History {
    pub from: Timestamp,
    pub to: Timestamp,
    pub step: Duration,
    /// Prometheus' address as it may be printed.
    pub prometheus: String,
    /// Per check of the spec, in its order: its name and one series per variant.
    pub checks: Vec<(String, Vec<Series>)>,
    /// The busiest pod's requests per second, per variant (what the capacity gate predicts).
    pub load: Vec<Series>,
    /// The operator's own gauges: the weight in force and the stage index, when this
    /// Prometheus scrapes the operator.
    pub weight: Result<Points, String>,
    pub stage: Result<Points, String>,
    /// The operator's count of stage analyses so far, per verdict (a counter: it restarts from
    /// 0 with the operator's process).
    pub verdicts: Vec<(Verdict, Result<Points, String>)>,
}

/// Analyses the operator counted between two samples of its counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    /// The sample before (the range's start for the first), and the one that counted them.
    pub since: f64,
    pub at: f64,
    pub count: u32,
}

/// The variants that ran and their Deployments: the target as baseline, the candidate (or, in a
/// selection, each candidate and the fresh baseline).
pub fn variants(exp: &ConcurrencyExperiment) -> Vec<(Variant, String)> {
    let target = &exp.spec.target_ref.name;
    let status = exp.status.clone().unwrap_or_default();
    let mut out = vec![(Variant::Baseline, target.clone())];
    if let Some(selection) = &status.selection {
        for v in &selection.variants {
            let index = usize::try_from(v.index).unwrap_or(0);
            out.push((
                Variant::Option(v.index, v.summary.clone()),
                variant_name(target, index),
            ));
        }
        if status
            .fresh_baseline
            .as_ref()
            .is_some_and(|f| f.variant.is_some() || f.measured.is_some())
        {
            out.push((Variant::FreshBaseline, fresh_baseline_name(target)));
        }
    }
    // The candidate that walks the stages: the only one, or a selection's winner.
    let walked = status.candidate.is_some()
        || exp.spec.candidate.is_some()
        || status
            .analyses
            .iter()
            .any(|a| a.candidate_requests.is_some());
    if walked {
        let deployment = status
            .candidate
            .as_ref()
            .map(|c| c.deployment.clone())
            .unwrap_or_else(|| candidate_name(target));
        // A selection's winner may walk the stages in its own Deployment: drawn once.
        if !out.iter().any(|(_, d)| *d == deployment) {
            out.push((Variant::Candidate, deployment));
        }
    }
    out
}

/// The experiment's time range (created → decided, or now) and the query step: at most
/// [`MAX_POINTS`] points, at least 5 s (a short experiment still gets a line, not a few dots).
pub fn range(exp: &ConcurrencyExperiment, now: Timestamp) -> (Timestamp, Timestamp, Duration) {
    let status = exp.status.clone().unwrap_or_default();
    let first_analysis = status.analyses.first().map(|a| a.at.0);
    let created = exp.creation_timestamp().map(|t| t.0);
    let from = match (created, first_analysis) {
        (Some(c), Some(a)) => c.min(a),
        (Some(c), None) => c,
        (None, Some(a)) => a,
        (None, None) => now,
    };
    let interval = parse_duration("spec.analysis.interval", &exp.spec.analysis.interval)
        .unwrap_or(Duration::from_secs(60));
    // One interval after the decision: the last analysis' window and the restore are in view.
    let to = match (&status.decision, status.phase.is_terminal()) {
        (Some(d), true) => (d.at.0 + interval).min(now),
        _ => now,
    };
    let to = to.max(from);
    let span = (to.as_second() - from.as_second()).max(0) as f64;
    let step = Duration::from_secs_f64((span / MAX_POINTS).ceil()).max(MIN_STEP);
    (from, to, step)
}

/// One of the operator's per-experiment series (`concurrency_experiment_*`), aggregated over
/// the operator's replicas with `aggregate` (`max` for a gauge, `sum` for a counter only the
/// leader moves). Scraped through a pod scrape job its `namespace` label becomes
/// `exported_namespace` (the pod's own wins), so both are asked for.
pub fn operator_query(
    aggregate: &str,
    metric: &str,
    exp: &ConcurrencyExperiment,
    extra: &str,
) -> String {
    let ns = escape(&exp.namespace().unwrap_or_default());
    let name = escape(&exp.name_any());
    let sel = |ns_label: &str| {
        format!(r#"{aggregate}({metric}{{experiment="{name}",{ns_label}="{ns}"{extra}}})"#)
    };
    format!("{} or {}", sel("namespace"), sel("exported_namespace"))
}

/// Where a counter of analyses rose, and by how much: a rise is that many analyses since the
/// sample before; a fall is the operator restarting (its count began again at 0); the first
/// sample counts whole, as the series is born at 0 with the experiment (or the process).
pub fn counted(points: &[(f64, f64)], from: f64) -> Vec<Counted> {
    let mut out = Vec::new();
    let mut prev: Option<(f64, f64)> = None;
    for &(t, v) in points {
        if !v.is_finite() || v < 0.0 {
            continue;
        }
        let (since, rise) = match prev {
            Some((pt, pv)) if v >= pv => (pt, v - pv),
            Some((pt, _)) => (pt, v),
            None => (from.min(t), v),
        };
        let count = rise.round() as u32;
        if count > 0 {
            out.push(Counted {
                since,
                at: t,
                count,
            });
        }
        prev = Some((t, v));
    }
    out
}

/// The analyses status keeps that the operator's count does not show yet: the counter is
/// scraped every few seconds, so the last analyses (often the one that decided) may have ended
/// after its last sample in the range. Each analysis is matched, in time order, to the earliest
/// unmatched counted analysis of its verdict seen at or after it; those left unmatched are not
/// in the count.
pub fn not_yet_counted<'a>(
    analyses: &'a [AnalysisRecord],
    counted: &[(Verdict, Vec<Counted>)],
) -> Vec<&'a AnalysisRecord> {
    let mut seen: Vec<(Verdict, Vec<f64>)> = counted
        .iter()
        .map(|(v, cs)| {
            let mut at: Vec<f64> = cs
                .iter()
                .flat_map(|c| std::iter::repeat_n(c.at, c.count as usize))
                .collect();
            at.sort_by(f64::total_cmp);
            (*v, at)
        })
        .collect();
    let mut by_time: Vec<&AnalysisRecord> = analyses.iter().collect();
    by_time.sort_by_key(|a| a.at.0);
    let mut out = Vec::new();
    for a in by_time {
        let at = a.at.0.as_second() as f64;
        let units = seen
            .iter_mut()
            .find(|(v, _)| *v == a.verdict)
            .map(|(_, u)| u);
        let matched = units.and_then(|u| {
            let i = u.iter().position(|&t| t >= at)?;
            Some(u.remove(i))
        });
        if matched.is_none() {
            out.push(a);
        }
    }
    out
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Where each stage began, to the scrape's resolution: the moments the stage gauge took a new
/// value, with that stage's index.
pub fn stage_starts(stage: &[(f64, f64)]) -> Vec<(f64, i32)> {
    let mut out = Vec::new();
    let mut last: Option<i32> = None;
    for &(t, v) in stage {
        if !v.is_finite() {
            continue;
        }
        let index = v.round() as i32;
        if last != Some(index) {
            out.push((t, index));
            last = Some(index);
        }
    }
    out
}
