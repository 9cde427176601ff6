//! The gate's prediction for one step, pure: from the analyses of the stage with the split in
//! force, the load per candidate pod at the next stage against its capacity, the worst
//! analysis deciding; a `queueTime` already over its `max` counts as over.

use super::super::ctx::Ctx;
use crate::analysis::{candidate_config, predict, PerRequest, Prediction, Unit};
use crate::api::{
    AnalysisRecord, BuiltinMetric, CapacityGate, CapacitySource, ConcurrencyExperimentSpec,
    RenderedServer, ServerConfig, ServerKind, Verdict,
};

pub(super) fn stage_name(spec: &ConcurrencyExperimentSpec, index: usize) -> String {
    format!("{}/{}", index + 1, spec.stages.len())
}

/// One analysis' prediction.
struct Predicted<'a> {
    rec: &'a AnalysisRecord,
    total_rate: f64,
    per_request: PerRequest,
    source: Option<CapacitySource>,
    prediction: Prediction,
}

/// A `queueTime` check's `max` the candidate already exceeded.
struct Queueing<'a> {
    rec: &'a AnalysisRecord,
    value: f64,
    max: f64,
}

/// The gate's view of the step from stage `index` to `index + 1`: pure, from the spec, the
/// recorded analyses and the observations.
pub fn evaluate(cx: &Ctx, index: usize, max: f64) -> CapacityGate {
    let started = cx.status.stage_started_at.as_ref().map(|s| s.0);
    let min_requests = cx.spec.analysis.min_requests as f64;
    let of_stage: Vec<&AnalysisRecord> = cx
        .status
        .analyses
        .iter()
        .filter(|a| a.stage_index == index as i32 && started.is_some_and(|s| a.at.0 >= s))
        .collect();
    // Analyses of this stage's split in force, with enough candidate requests that the times
    // per request are not noise.
    let in_stage: Vec<&AnalysisRecord> = of_stage
        .iter()
        .copied()
        .filter(|a| a.candidate_requests.is_some_and(|r| r >= min_requests))
        .collect();
    let from = Source {
        name: format!("stage {}", stage_name(cx.spec, index)),
        analysed: !of_stage.is_empty(),
    };
    predict_step(cx, index + 1, &in_stage, &from, max, cx.candidate())
}

/// What a step is predicted from: `stage 1/3`, or `the selection` (the winner's analyses
/// there, for the step into stage 1), and whether it was analysed at all.
pub(in crate::plan) struct Source {
    pub(in crate::plan) name: String,
    pub(in crate::plan) analysed: bool,
}

/// The prediction for stepping into stage `next` from the analyses `in_stage` (those with
/// enough candidate requests), the worst one deciding, for `candidate` (the walked one, or a
/// selection's survivor before the choice).
pub(in crate::plan) fn predict_step(
    cx: &Ctx,
    next: usize,
    in_stage: &[&AnalysisRecord],
    from: &Source,
    max: f64,
    candidate: &ServerConfig,
) -> CapacityGate {
    let spec = cx.spec;
    let weight = cx.stage_weight(next);
    let split = cx.split(weight);
    let (share, pods) = (split.planned_effective_weight, split.candidate);
    let baseline = cx
        .obs
        .target
        .as_ref()
        .and_then(|t| t.baseline.as_ref())
        .or(cx.status.baseline.as_ref().map(|b| &b.config));
    let config = candidate_config(candidate, baseline);
    let cpu_limit = cx.obs.candidate_cpu_limit;
    let predictions: Vec<Predicted> = in_stage
        .iter()
        .filter_map(|rec| {
            let m = rec.capacity.as_ref()?;
            let c = m.candidate.as_ref()?;
            let per_request = PerRequest {
                cpu: c.cpu_per_request?,
                io: c.io_per_request?,
                blocking: c.blocking_per_request.unwrap_or(0.0),
            };
            let total_rate = m.total_rate?;
            let prediction = predict(&config, per_request, cpu_limit, total_rate, share, pods)?;
            Some(Predicted {
                rec,
                total_rate,
                per_request,
                source: c.source,
                prediction,
            })
        })
        .collect();
    let worst = predictions.iter().max_by(|a, b| {
        a.prediction
            .utilization
            .total_cmp(&b.prediction.utilization)
    });
    let queueing = queueing(spec, in_stage);
    let stage = stage_name(spec, next);
    let planned = if share == weight {
        String::new()
    } else {
        format!(" — the replicas router gives {share}% for the planned {weight}%")
    };
    let mut gate = CapacityGate {
        stage: stage.clone(),
        stage_index: next as i32,
        weight: share,
        candidate_pods: pods,
        total_rate: None,
        predicted_rate_per_pod: None,
        capacity_per_pod: None,
        predicted_utilization: None,
        source: None,
        max_utilization: max,
        verdict: Verdict::Inconclusive,
        message: String::new(),
        analysis_at: None,
        approved: false,
    };
    let queue_note = queueing.as_ref().map(|q| {
        format!(
            "the candidate already queued {} at {}% (queueTime max {})",
            Unit::Seconds.format(q.value),
            q.rec.weight,
            Unit::Seconds.format(q.max)
        )
    });
    match worst {
        Some(p) => {
            let pr = &p.prediction;
            let over = pr.utilization > max || queueing.is_some();
            let cmp = if pr.utilization > max { ">" } else { "≤" };
            let pods_word = if pods == 1 { "pod" } else { "pods" };
            let mut msg = format!(
                "Stage {stage} would give the candidate {} per pod ({share}% of {} on {pods} \
                 {pods_word}{planned}); its estimated capacity is {} ({}, {} CPU + {} I/O per \
                 request{}, bound {}): predicted utilization {} {cmp} {}",
                rate(pr.load_per_pod),
                rate(p.total_rate),
                rate(pr.capacity.per_pod),
                config.summary(),
                Unit::Seconds.format(p.per_request.cpu),
                Unit::Seconds.format(p.per_request.io),
                source_note(p.source),
                pr.capacity.bound.as_str(),
                percent(pr.utilization),
                percent(max),
            );
            if let Some(note) = &queue_note {
                msg.push_str(&format!("; and {note}"));
            }
            msg.push('.');
            gate.total_rate = Some(p.total_rate);
            gate.predicted_rate_per_pod = Some(pr.load_per_pod);
            gate.capacity_per_pod = Some(pr.capacity.per_pod);
            gate.predicted_utilization = Some(pr.utilization);
            gate.source = p.source;
            gate.analysis_at = Some(p.rec.at.clone());
            gate.verdict = if over { Verdict::Fail } else { Verdict::Pass };
            gate.message = msg;
        }
        None => match &queue_note {
            // Queueing beyond its limit needs no estimate to say the step is too big.
            Some(note) => {
                gate.verdict = Verdict::Fail;
                gate.analysis_at = queueing.map(|q| q.rec.at.clone());
                let why = unknown(cx, from, &config, in_stage);
                gate.message = format!(
                    "Stage {stage} would give the candidate more traffic ({share}% on {pods} \
                     pods{planned}), but {note}; no capacity estimate: {why}"
                );
            }
            None => {
                let why = unknown(cx, from, &config, in_stage);
                gate.message = format!("Stage {stage} cannot be predicted: {why}");
            }
        },
    }
    gate
}

/// Why no prediction could be made, in one sentence naming the fix where there is one.
fn unknown(
    cx: &Ctx,
    from: &Source,
    config: &RenderedServer,
    in_stage: &[&AnalysisRecord],
) -> String {
    let spec = cx.spec;
    let stage = &from.name;
    if config.workers.is_none_or(|w| w < 1) {
        return "the candidate's worker count is unknown (the target does not say it either); \
                set spec.candidate.workers."
            .into();
    }
    if config.server == ServerKind::Puma && config.threads.is_none_or(|t| t < 1) {
        return "the candidate's thread count is unknown (the target does not say it either); \
                set spec.candidate.threads."
            .into();
    }
    if !from.analysed {
        return format!("no analysis of {stage} yet.");
    }
    let Some(latest) = in_stage.last() else {
        return format!(
            "no analysis of {stage} had minRequests ({}) candidate requests.",
            spec.analysis.min_requests
        );
    };
    let names = &spec.analysis.metrics.resolve();
    let m = latest.capacity.as_ref();
    let c = m.and_then(|m| m.candidate.as_ref());
    let mut missing = Vec::new();
    if c.and_then(|c| c.cpu_per_request).is_none() {
        missing.push(format!(
            "CPU time per request (neither metrics.runningSeconds {} nor metrics.cpuUsage {} \
             over metrics.requestsTotal {})",
            names.running_seconds, names.cpu_usage, names.requests_total
        ));
    }
    if c.and_then(|c| c.io_per_request).is_none() {
        missing.push(format!(
            "I/O time per request (neither metrics.ioWaitSeconds {} nor \
             metrics.requestDuration {}_sum / _count with the CPU)",
            names.io_wait_seconds, names.request_duration
        ));
    }
    if m.and_then(|m| m.total_rate).is_none() {
        missing.push(format!(
            "the total request rate (metrics.requestsTotal {})",
            names.requests_total
        ));
    }
    if missing.is_empty() {
        // Measured, yet no estimate: zero CPU time per request (nothing bounds the model).
        return format!(
            "the candidate's measurements in {stage} give no capacity estimate (no CPU time \
             per request)."
        );
    }
    format!(
        "Prometheus had no {} for the candidate in {stage}; set \
         spec.analysis.maxPredictedUtilization: off if the app has neither.",
        missing.join(", nor ")
    )
}

/// The highest candidate queue time above a `queueTime` check's `max` in the stage.
fn queueing<'a>(
    spec: &ConcurrencyExperimentSpec,
    in_stage: &[&'a AnalysisRecord],
) -> Option<Queueing<'a>> {
    let checks: Vec<(String, f64)> = spec
        .analysis
        .checks
        .iter()
        .filter(|c| c.metric == Some(BuiltinMetric::QueueTime))
        .filter_map(|c| {
            let max = c.max.as_ref()?.value("queueTime.max").ok()?;
            Some((c.display_name(), max))
        })
        .collect();
    in_stage
        .iter()
        .flat_map(|rec| {
            checks.iter().filter_map(move |(name, max)| {
                let value = rec
                    .checks
                    .iter()
                    .find(|c| &c.name == name)?
                    .candidate
                    .filter(|v| v.is_finite() && v > max)?;
                Some(Queueing {
                    rec,
                    value,
                    max: *max,
                })
            })
        })
        .max_by(|a, b| (a.value / a.max).total_cmp(&(b.value / b.max)))
}

/// The times' source in the message: only the fallback is named (the GVL counters are the
/// model's own inputs), so a reader knows its I/O counts GVL wait in.
fn source_note(source: Option<CapacitySource>) -> &'static str {
    match source {
        Some(CapacitySource::StandardMetrics) => " from standard metrics",
        _ => "",
    }
}

/// Requests per second for people: `20.1 req/s`.
fn rate(v: f64) -> String {
    format!("{v:.1} req/s")
}

/// A share for people: `124%`.
fn percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

pub(super) fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}
