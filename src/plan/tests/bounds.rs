//! Status stays bounded whatever the spec: the largest spec the CRD admits (5 candidates,
//! 32 custom checks with names of 63 characters and queries near 4 KiB, long multi-byte
//! Prometheus errors) driven through a selection with eliminations and a ranking, then more
//! than 10 analyses in the stages, by the real analysis (`analysis::analyse`) and the machine.

use std::collections::BTreeMap;

use super::selection_world::*;
use super::*;
use crate::analysis::{
    analyse, analyse_selection, AnalysisContext, CandidateToJudge, MetricSource, PrometheusError,
    SelectionContext,
};
use crate::api::{Check, Phase, STATUS_BYTES};

const CHECKS: usize = 32;
const CANDIDATES: usize = 5;
/// A target name as long as a Deployment's usually is (its pods' regex grows with it).
const TARGET: &str = "storefront-checkout-payments-and-inventory-api-v2";

/// A check name of 63 characters (the schema's longest).
fn check_name(i: usize) -> String {
    format!("{:x<63}", format!("c{i:02}-"))
}

/// Valid PromQL just under the schema's 4096 bytes, with `{{pods}}` in every term: rendered,
/// it is several times longer.
fn long_query(i: usize) -> String {
    let term = format!(
        "sum(rate(check_metric_{i:02}_total{{pod=~\"{{{{pods}}}}\",namespace=\"{{{{namespace}}}}\"}}[{{{{interval}}}}]))"
    );
    let mut q = term.clone();
    while q.len() + term.len() + 3 <= 4096 {
        q.push_str(" + ");
        q.push_str(&term);
    }
    q
}

fn largest_spec() -> ConcurrencyExperimentSpec {
    let mut spec = spec_with(
        "selection: {weight: 10, duration: 6m}\n\
         candidates: [{server: puma, workers: 1, threads: 1}, {server: puma, workers: 2, threads: 2}, \
         {server: puma, workers: 2, threads: 3}, {server: puma, workers: 2, threads: 4}, \
         {server: falcon, workers: 2}]\n",
    );
    spec.candidate = None;
    spec.target_ref.name = TARGET.into();
    spec.analysis.failure_limit = 1;
    spec.analysis.inconclusive_limit = 100;
    // Capacity is not what this test is about (the source has no CPU figures).
    spec.analysis.max_predicted_utilization = "off".into();
    spec.analysis.checks = (0..CHECKS)
        .map(|i| {
            serde_json::from_value::<Check>(serde_json::json!({
                "name": check_name(i),
                "query": long_query(i),
                "min": "0.0000000000000000000000000001",
                "max": "9999999999999999999999999999999",
                "maxIncrease": "99999999999999999999999999999%",
            }))
            .unwrap()
        })
        .collect();
    spec
}

/// 2 KiB of Japanese (3 bytes a character): what a Prometheus behind a localized proxy says.
fn long_error() -> String {
    "クエリの評価に失敗しました。".repeat(50)
}

/// Answers every check query: `Fail` values for the candidates in `failing`, a long
/// multi-byte error on odd checks when `errors`, else a passing value.
struct Source {
    failing: Vec<usize>,
    errors: bool,
}

impl MetricSource for Source {
    async fn query_value(
        &self,
        promql: &str,
        _at: jiff::Timestamp,
    ) -> Result<Option<f64>, PrometheusError> {
        if promql.contains("ruby_event_loop_probe_seconds_total") {
            // The Falcon variant's event loops per pod, as rendered: its `workers` entry passes
            // with a value and a reason, as large as that entry gets.
            return Ok(Some(2.0));
        }
        let Some(rest) = promql.split("check_metric_").nth(1) else {
            // Requests and the capacity queries.
            return Ok(Some(1000.0));
        };
        let check: usize = rest[..2].parse().unwrap();
        let candidate = (0..CANDIDATES).find(|k| promql.contains(&format!("-candidate-{}", k + 1)));
        if self.errors && check % 2 == 1 {
            return Err(PrometheusError::Server(long_error()));
        }
        // Values as long as a float is written (17 significant digits and an exponent).
        match candidate {
            Some(k) if self.failing.contains(&k) => Ok(Some(1.2345678901234567e40)),
            _ => Ok(Some(1.2345678901234567e-10)),
        }
    }
}

fn context(now: i64, candidate: &str, weight: i32, stage_index: i32) -> AnalysisContext {
    AnalysisContext {
        namespace: "shop".into(),
        container: "web".into(),
        baseline_deployment: format!("{TARGET}-fresh"),
        candidate_deployment: candidate.into(),
        stage_index,
        stage_started_at: None,
        weight,
        now: at(now),
        baseline_config: None,
        baseline_cpu_limit: None,
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}

fn size(status: &ConcurrencyExperimentStatus) -> usize {
    serde_json::to_vec(status).unwrap().len()
}

#[test]
fn the_largest_spec_keeps_status_under_its_bound() {
    let spec = largest_spec();
    let mut s = Sel::new(spec.clone(), 12);
    s.tick(None);
    s.tick(None);
    assert_eq!(s.run.status.phase, Phase::Selecting);
    let mut largest = 0;
    // The selection: candidates 1 and 2 fail (with errors on half their checks) and are
    // eliminated; the survivors alternate between passing and long errors.
    let mut n = 0;
    while s.run.status.phase == Phase::Selecting {
        n += 1;
        assert!(n < 40, "the selection never ended");
        s.run.now += 60;
        let candidates = (0..CANDIDATES)
            .filter(|i| s.variants[*i].is_some())
            .map(|index| CandidateToJudge {
                index,
                deployment: crate::workload::variant_name(TARGET, index),
                config: spec.candidate_list()[index].clone(),
                cpu_limit: None,
                weight: 10,
            })
            .collect();
        let sctx = SelectionContext {
            base: context(s.run.now, "", 10, 0),
            target_deployment: TARGET.into(),
            candidates,
        };
        let source = Source {
            failing: vec![0, 1],
            errors: n % 2 == 0 || n <= 2,
        };
        let mut a = futures::executor::block_on(analyse_selection(&source, &spec, &sctx));
        for c in &mut a.candidates {
            c.objective = Some((200 + c.index) as f64 * MIB);
        }
        a.fresh_baseline_objective = Some(210.0 * MIB);
        s.tick(Some(a));
        largest = largest.max(size(&s.run.status));
        if s.run.status.phase == Phase::Selecting {
            // Every surviving candidate's last checks, with their reasons, are in status (and
            // the Falcon variant's worker count beside them).
            let sel = s.selection();
            for v in &sel.variants {
                let custom = v
                    .checks
                    .iter()
                    .filter(|c| c.name != crate::api::WORKERS_CHECK);
                assert_eq!(custom.count(), CHECKS);
            }
        }
    }
    let sel = s.selection();
    assert_eq!(sel.winner, Some(2), "{:?}", sel.message);
    assert_eq!(
        sel.variants
            .iter()
            .filter(|v| v.eliminated.is_some())
            .count(),
        2
    );
    assert_eq!(sel.ranking.len(), CANDIDATES);
    assert_eq!(s.run.status.phase, Phase::Progressing);
    // The stages: 12 analyses with a long error on every other check (inconclusive, within
    // inconclusiveLimit), then an abort.
    let candidate = crate::workload::candidate_name(TARGET);
    let mut analyses = 0;
    while analyses < 12 {
        s.run.now += 60;
        let sel = s.observe(None);
        let due = analysis_due(&s.run.spec, &s.run.status, at(s.run.now));
        let outcome = due.then(|| {
            let stage = s.run.status.stage_index.unwrap_or(0);
            let ctx = AnalysisContext {
                baseline_deployment: TARGET.into(),
                ..context(s.run.now, &candidate, s.run.status.effective_weight, stage)
            };
            let source = Source {
                failing: vec![],
                errors: true,
            };
            let history = s.run.status.analyses.clone();
            futures::executor::block_on(analyse(&source, &spec, &ctx, &history, &BTreeMap::new()))
        });
        analyses += usize::from(outcome.is_some());
        s.run.tick_with(None, |o| {
            o.selection = Some(sel.clone());
            o.analysis = outcome.clone();
        });
        largest = largest.max(size(&s.run.status));
    }
    assert_eq!(s.run.status.analyses.len(), KEPT_ANALYSES);
    assert_eq!(s.run.status.phase, Phase::Progressing);
    s.abort = true;
    for _ in 0..3 {
        s.run.now += 10;
        s.tick(None);
        largest = largest.max(size(&s.run.status));
    }
    assert!(s.run.status.decision.is_some());
    eprintln!("largest status: {largest} bytes");
    // What is kept is still what a person needs: the newest analysis' reasons (cut at a
    // character boundary) and each check's query once.
    let st = &s.run.status;
    let newest = st.analyses.last().unwrap();
    let error = newest.checks[1].reason.as_deref().unwrap();
    assert!(
        error.starts_with("baseline query failed (PrometheusError)") && error.ends_with('…'),
        "{error}"
    );
    assert!(error.len() <= crate::api::CHECK_REASON_BYTES);
    assert_eq!(st.queries.len(), CHECKS);
    assert!(st
        .queries
        .values()
        .all(|q| q.len() <= crate::api::QUERY_BYTES));
    assert!(st.queries[&check_name(0)].contains(&candidate));
    assert!(
        largest <= STATUS_BYTES,
        "status reached {largest} bytes, above {STATUS_BYTES}"
    );
}
