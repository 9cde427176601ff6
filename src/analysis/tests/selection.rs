//! A selection's interval: each candidate judged against the fresh baseline, the objective per
//! variant from the right query (or the capacity measurement), and both baselines side by side.

use jiff::Timestamp;

use super::fixtures::context;
use crate::analysis::*;
use crate::api::{ConcurrencyExperimentSpec, ServerConfig, Verdict};

const MIB: f64 = 1024.0 * 1024.0;

/// Which Deployment's pods a query selects, by its `{{pods}}` regex.
fn whose(q: &str) -> &'static str {
    for d in [
        "storefront-candidate-1",
        "storefront-candidate-2",
        "storefront-fresh-baseline",
    ] {
        if q.contains(d) {
            return d;
        }
    }
    "storefront"
}

/// Answers per metric and Deployment: 1000 requests each; p99 latency 0.2 s except candidate
/// 2 (0.5 s); memory 200 MiB on the target, 150 on the fresh baseline, 160 and 140 on the
/// candidates; CPU per request 10 ms on the fresh baseline, 12 and 8 ms on the candidates.
struct Table;

impl MetricSource for Table {
    async fn query_value(&self, q: &str, _at: Timestamp) -> Result<Option<f64>, PrometheusError> {
        let d = whose(q);
        let pick = |target: f64, fresh: f64, c1: f64, c2: f64| match d {
            "storefront-candidate-1" => c1,
            "storefront-candidate-2" => c2,
            "storefront-fresh-baseline" => fresh,
            _ => target,
        };
        Ok(if q.starts_with("sum(increase(rails_requests_total") {
            Some(1000.0)
        } else if q.contains("rails_request_duration_seconds_bucket") {
            Some(pick(0.25, 0.2, 0.2, 0.5))
        } else if q.contains("container_memory_working_set_bytes") {
            Some(pick(200.0, 150.0, 160.0, 140.0) * MIB)
        } else if q.starts_with("sum(rate(ruby_running_seconds_total") {
            Some(pick(0.011, 0.010, 0.012, 0.008))
        } else {
            None
        })
    }
}

fn spec(objective: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        "targetRef: {{name: storefront}}\n\
         candidates: [{{server: puma, workers: 2, threads: 3}}, {{server: puma, workers: 2, threads: 4}}]\n\
         selection: {{objective: {objective}}}\n\
         analysis:\n  prometheus: {{url: \"http://p:9090\"}}\n  interval: 1m\n  minRequests: 50\n  \
         checks: [{{metric: latency, quantile: 0.9, maxIncrease: 50%}}]\n"
    ))
    .unwrap()
}

fn selection_context(spec: &ConcurrencyExperimentSpec) -> SelectionContext {
    let base = AnalysisContext {
        baseline_deployment: "storefront-fresh-baseline".into(),
        ..context(10)
    };
    let candidate = |index: usize, config: &ServerConfig| CandidateToJudge {
        index,
        deployment: format!("storefront-candidate-{}", index + 1),
        config: config.clone(),
        cpu_limit: None,
        weight: 10,
    };
    SelectionContext {
        base,
        target_deployment: "storefront".into(),
        candidates: spec
            .candidate_list()
            .iter()
            .enumerate()
            .map(|(i, c)| candidate(i, c))
            .collect(),
    }
}

#[tokio::test]
async fn each_candidate_is_judged_against_the_fresh_baseline_with_its_objective() {
    let spec = spec("{minimize: memory}");
    let sctx = selection_context(&spec);
    let a = analyse_selection(&Table, &spec, &sctx).await;
    let seen: Vec<_> = a
        .candidates
        .iter()
        .map(|c| {
            (
                c.index,
                c.outcome.record.verdict,
                c.objective.map(|o| o / MIB),
            )
        })
        .collect();
    // Candidate 2's 0.5 s is beyond 0.2 s + 50 % of the fresh baseline; candidate 1 passes.
    assert_eq!(
        seen,
        [
            (0, Verdict::Pass, Some(160.0)),
            (1, Verdict::Fail, Some(140.0))
        ]
    );
    assert_eq!(a.fresh_baseline_objective.map(|o| o / MIB), Some(150.0));
    let latency = &a.candidates[1].outcome.record.checks[0];
    assert_eq!(
        (latency.baseline, latency.candidate),
        (Some(0.2), Some(0.5))
    );
    // The candidate's capacity is estimated with its own config (2×4), not another's.
    let cap = a.candidates[1].outcome.record.capacity.as_ref().unwrap();
    assert_eq!(cap.candidate.as_ref().unwrap().cpu_per_request, Some(0.008));
    // Both baselines' values side by side: the target's older pods are slower here.
    let values = baseline_values(&Table, &spec, &sctx.base, &sctx.target_deployment).await;
    let values: Vec<_> = values
        .iter()
        .map(|v| (v.name.as_str(), v.target, v.fresh))
        .collect();
    assert_eq!(values, [("latency", Some(0.25), Some(0.2))]);
}

#[tokio::test]
async fn the_cpu_objective_is_the_capacity_measurements_cpu_per_request() {
    let spec = spec("{minimize: cpu}");
    let a = analyse_selection(&Table, &spec, &selection_context(&spec)).await;
    let cpu: Vec<_> = a.candidates.iter().map(|c| c.objective).collect();
    assert_eq!(cpu, [Some(0.012), Some(0.008)]);
    assert_eq!(a.fresh_baseline_objective, Some(0.010));
}

#[test]
fn the_objective_query_follows_the_checks_quantile_or_is_the_custom_one() {
    let latency = objective(&spec("{minimize: latency}")).unwrap();
    let Objective::Query(q) = latency else {
        panic!("{latency:?}")
    };
    assert!(q.starts_with("histogram_quantile(0.9,"), "{q}");
    let queue = objective(&spec("{minimize: queueTime}")).unwrap();
    let Objective::Query(q) = queue else {
        panic!("{queue:?}")
    };
    assert!(q.starts_with("histogram_quantile(0.99,"), "{q}");
    assert!(q.contains("rails_request_queue_time_seconds_bucket"), "{q}");
    let custom = objective(&spec(
        "{minimize: custom, query: 'max(up{pod=~\"{{pods}}\"})'}",
    ));
    assert_eq!(
        custom.unwrap(),
        Objective::Query("max(up{pod=~\"{{pods}}\"})".into())
    );
}

#[test]
fn an_unreachable_prometheus_makes_every_candidate_inconclusive() {
    let spec = spec("{minimize: memory}");
    let a = unreachable_selection(&selection_context(&spec), "Prometheus p: refused");
    assert_eq!(a.candidates.len(), 2);
    assert!(a.candidates.iter().all(|c| {
        c.outcome.record.verdict == Verdict::Inconclusive
            && c.outcome.record.reason.as_deref() == Some("Prometheus p: refused")
            && c.objective.is_none()
    }));
}

/// A Falcon variant's event loops per pod are counted as the single candidate's: candidate 2
/// runs 8 loops per pod against its 2 workers (a `count` in falcon.rb), and fails on it.
#[tokio::test]
async fn a_falcon_variant_running_other_workers_than_rendered_fails_on_workers() {
    struct Loops;
    impl MetricSource for Loops {
        async fn query_value(
            &self,
            q: &str,
            at: Timestamp,
        ) -> Result<Option<f64>, PrometheusError> {
            if q.contains("ruby_event_loop_probe_seconds_total") && q.starts_with("max(") {
                return Ok(Some(match whose(q) {
                    "storefront-candidate-2" => 8.0,
                    _ => 2.0,
                }));
            }
            Table.query_value(q, at).await
        }
    }
    let spec: ConcurrencyExperimentSpec = serde_yaml::from_str(
        "targetRef: {name: storefront}\n\
         candidates: [{server: falcon, workers: 2}, {server: falcon, workers: 2}]\n\
         analysis:\n  prometheus: {url: \"http://p:9090\"}\n  interval: 1m\n  minRequests: 50\n  \
         checks: [{metric: errorRate, max: 5%}]\n",
    )
    .unwrap();
    let a = analyse_selection(&Loops, &spec, &selection_context(&spec)).await;
    let workers: Vec<_> = a
        .candidates
        .iter()
        .map(|c| {
            let w = c.outcome.record.checks.iter().find(|x| x.name == "workers");
            let r = &c.outcome.record;
            let failed_on_workers = r.verdict == Verdict::Fail
                && r.reason.as_deref().is_some_and(|x| x.contains("workers"));
            (w.map(|w| (w.verdict, w.candidate)), failed_on_workers)
        })
        .collect();
    assert_eq!(
        workers,
        [
            (Some((Verdict::Pass, Some(2.0))), false),
            (Some((Verdict::Fail, Some(8.0))), true),
        ]
    );
}
