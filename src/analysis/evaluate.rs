//! One analysis: every check once per variant, the requests per variant, the I/O share, then
//! judgement. The numbers come from a `MetricSource` (Prometheus in the operator, a table in
//! the unit tests); any error becomes an Inconclusive check with its reason — never a Pass,
//! never a panic.

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use std::collections::BTreeMap;

use crate::api::{
    parse_duration, AnalysisRecord, BaselineReference, CapacityMeasurement, Check, CheckResult,
    ConcurrencyExperimentSpec, Recommendation, Verdict,
};

use super::anytime::{self, sequential_bounds, test_alpha, Read};
use super::capacity::choose_io_share;
use super::capacity_measure::{measure_capacity, note_capacity_source, standard_times};
use super::capacity_queries::io_share_template;
use super::check::{describe, judge_measured, measure_check, Measured};
use super::context::{fit_window, AnalysisContext};
use super::judge::{aggregate, Limits};
use super::queries::{is_headroom, requests_template};
use super::queue_header::{judges_queue_time, note_coarse_clock, note_missing_header, read_clock};
use super::recommend::recommend_from_spec;
use super::reference::reference_baseline;
use super::source::MetricSource;
use super::template::{pods_regex, pods_regex_any, render, TemplateVars};

/// Checks evaluated concurrently (two queries each).
const CHECKS_IN_FLIGHT: usize = 4;

/// What one analysis yields, for the stage machine (`plan::Observations::analysis`).
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisOutcome {
    pub record: AnalysisRecord,
    /// Present when the I/O share could be measured in this analysis.
    pub recommendation: Option<Recommendation>,
    /// Prometheus answered every check's queries, with no sample for the candidate nor (below
    /// 100%) the baseline: the metrics are not there at all, which no waiting for traffic fixes.
    pub no_data: bool,
    /// Per check name, the candidate's query as sent (`status.queries`); absent for a check
    /// that was never rendered.
    pub queries: BTreeMap<String, String>,
}

/// Runs one analysis for the current interval. `history` is `status.analyses` (statistical
/// samples) and `reference` is `status.baselineReference` (the baseline's values at 100%).
pub async fn analyse(
    source: &impl MetricSource,
    spec: &ConcurrencyExperimentSpec,
    ctx: &AnalysisContext,
    history: &[AnalysisRecord],
    reference: &BTreeMap<String, BaselineReference>,
) -> AnalysisOutcome {
    let analysis = &spec.analysis;
    let record =
        |verdict, checks, requests: (Option<f64>, Option<f64>), reason, capacity| AnalysisRecord {
            at: Time(ctx.now),
            stage_index: ctx.stage_index,
            weight: ctx.weight,
            verdict,
            baseline_requests: requests.0,
            candidate_requests: requests.1,
            checks,
            reason: Some(reason),
            capacity,
        };
    let interval = match parse_duration("spec.analysis.interval", &analysis.interval) {
        Ok(i) => i,
        Err(e) => {
            return AnalysisOutcome {
                record: record(
                    Verdict::Inconclusive,
                    Vec::new(),
                    (None, None),
                    e.to_string(),
                    None,
                ),
                recommendation: None,
                no_data: false,
                queries: BTreeMap::new(),
            }
        }
    };
    let window = fit_window(ctx.stage_started_at, ctx.now, interval);
    let vars = |pods: String| TemplateVars {
        namespace: ctx.namespace.clone(),
        pods,
        interval,
        container: ctx.container.clone(),
        window,
    };
    let baseline = vars(pods_regex(&ctx.baseline_deployment));
    let candidate = vars(pods_regex(&ctx.candidate_deployment));
    let both = vars(pods_regex_any(&[
        &ctx.baseline_deployment,
        &ctx.candidate_deployment,
    ]));

    // A few checks at a time: Prometheus queues queries beyond `--query.max-concurrency`
    // (20 by default), and queued queries would eat into each query's timeout.
    // Collected first: a stream over a borrowing closure is not provably `Send` (rustc's
    // higher-ranked lifetime limitation), and the controller runs this on spawned tasks.
    let names = analysis.metrics.resolve();
    let measures: Vec<_> = analysis
        .checks
        .iter()
        .map(|c| measure_check(source, &names, c, &baseline, &candidate, ctx.now))
        .collect();
    let checks = stream::iter(measures)
        .buffered(CHECKS_IN_FLIGHT)
        .collect::<Vec<_>>();
    let requests = async {
        let Ok(t) = requests_template(&names) else {
            let e = "spec.analysis.metrics.requestsTotal is not a metric name";
            return (Err(e.to_string()), Err(e.to_string()));
        };
        let query = |v: &TemplateVars| {
            let q = render("requests", &t, v);
            async move {
                match q {
                    Ok(q) => source
                        .query_value(&q, ctx.now)
                        .await
                        .map_err(|e| describe("requests", &e)),
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        futures::join!(query(&baseline), query(&candidate))
    };
    let io_share = async {
        let q = io_share_template(&names)
            .ok()
            .and_then(|t| render("ioShare", &t, &both).ok());
        let exact = match q {
            Some(q) => source.query_value(&q, ctx.now).await.ok().flatten(),
            None => None,
        };
        // The standard metrics only where the counters have nothing.
        let standard = match choose_io_share(exact, None) {
            Some(_) => None,
            None => Some(standard_times(source, &names, &both, ctx.now).await),
        };
        choose_io_share(exact, standard)
    };
    // At 100% the baseline serves nothing (see below): nothing of it to measure.
    let baseline_gone = ctx.weight >= 100;
    let capacity = measure_capacity(
        source,
        spec,
        ctx,
        (!baseline_gone).then_some(&baseline),
        &candidate,
        &both,
    );
    // `judge: sequential`: the stage so far for each sequential check, beside the rest.
    let alpha = test_alpha(analysis, spec.stages.len()).ok().flatten();
    let names = &names;
    let reads: Vec<_> = analysis
        .checks
        .iter()
        .map(|c| {
            let bounds = alpha.and_then(|_| sequential_bounds(c, &Limits::from_check(c).ok()?));
            async move {
                match bounds {
                    Some(b) => Some((
                        b,
                        anytime::read(source, spec, names, ctx, c, interval).await,
                    )),
                    None => None,
                }
            }
        })
        .collect();
    let reads = stream::iter(reads)
        .buffered(CHECKS_IN_FLIGHT)
        .collect::<Vec<_>>();
    // Both variants' queue times over the stage: the same load balancer stamps both, and a
    // one-second clock shows in their shape (`queue_header`).
    let clock = async {
        match judges_queue_time(&analysis.checks) {
            true => read_clock(source, names, &both, ctx.now).await,
            false => None,
        }
    };
    let (checks, (base_req, cand_req), io_share, reads, clock) =
        futures::join!(checks, requests, io_share, reads, clock);
    // After the checks, not beside them: a few more queries in flight at once would crowd
    // Prometheus' `--query.max-concurrency`; every query is evaluated at `now` anyway.
    let capacity = capacity.await;
    let checks = fill_headroom(&analysis.checks, checks, capacity.as_ref());

    let recommendation = io_share.and_then(|(p, from)| {
        let mut r = recommend_from_spec(p, &analysis.recommendation)
            .ok()
            .flatten()?;
        r.source = Some(from);
        if from == crate::api::CapacitySource::StandardMetrics {
            r.message
                .push_str(" — from standard metrics: (wall − CPU) / wall, GVL wait counted as I/O");
        }
        Some(r)
    });
    let counts = (
        base_req.as_ref().ok().copied().flatten(),
        cand_req.as_ref().ok().copied().flatten(),
    );
    // At 100% the baseline serves nothing (the replicas router has scaled it to zero), so it
    // cannot be measured: the candidate is compared with the baseline's last measured values
    // and only the candidate needs `minRequests`. Otherwise the last stage could never pass.
    let gate = |r: Option<f64>| {
        if baseline_gone {
            Some(analysis.min_requests as f64)
        } else {
            r
        }
    };
    let enough = |r: Option<f64>| r.is_some_and(|v| v >= analysis.min_requests as f64);
    let current_counts = enough(gate(counts.0)) && enough(counts.1);
    let no_data = !checks.is_empty() && checks.iter().all(|m| m.empty(baseline_gone));
    let queries = checks
        .iter()
        .filter_map(|m| Some((m.result.name.clone(), m.query.clone()?)))
        .collect();
    let checks: Vec<CheckResult> = checks
        .into_iter()
        .zip(analysis.checks.iter().zip(reads))
        .map(|(mut m, (check, read))| {
            if baseline_gone {
                m.result.baseline = reference_baseline(reference, history, &m.result.name);
            }
            match (read, alpha) {
                (Some((bounds, Read::Data(data))), Some(alpha)) => {
                    anytime::judge(m.result, check, bounds, alpha, &data)
                }
                (Some((_, Read::Failed(why))), Some(_)) => {
                    let mut r = m.result;
                    r.verdict = Verdict::Inconclusive;
                    r.reason = Some(why);
                    r
                }
                (Some((_, Read::PerInterval(note))), _) => {
                    let mut r = judge_measured(m, analysis, history, current_counts);
                    r.reason = Some(format!("{} ({note})", r.reason.unwrap_or_default()));
                    r
                }
                _ => judge_measured(m, analysis, history, current_counts),
            }
        })
        .collect();
    let checks = note_capacity_source(&analysis.checks, checks, capacity.as_ref());
    let checks = note_missing_header(&analysis.checks, checks, counts.1, analysis.min_requests);
    let checks = note_coarse_clock(&analysis.checks, checks, clock.as_ref());
    let (verdict, reason) = match (&base_req, &cand_req) {
        (Err(e), _) if !baseline_gone => (Verdict::Inconclusive, format!("baseline {e}")),
        (_, Err(e)) => (Verdict::Inconclusive, format!("candidate {e}")),
        _ => aggregate(&checks, gate(counts.0), counts.1, analysis.min_requests),
    };
    AnalysisOutcome {
        record: record(verdict, checks, counts, reason, capacity),
        recommendation,
        no_data,
        queries,
    }
}

/// The `headroom` checks' values: each variant's headroom from the capacity measurement
/// (none without one: the check is then Inconclusive, like any check without data).
fn fill_headroom(
    specs: &[Check],
    mut measured: Vec<Measured>,
    capacity: Option<&CapacityMeasurement>,
) -> Vec<Measured> {
    for (check, m) in specs.iter().zip(measured.iter_mut()) {
        if is_headroom(check) && m.limits.is_some() {
            m.result.baseline = capacity
                .and_then(|c| c.baseline.as_ref())
                .and_then(|b| b.headroom);
            m.result.candidate = capacity
                .and_then(|c| c.candidate.as_ref())
                .and_then(|c| c.headroom);
        }
    }
    measured
}
