//! The selection block of `get NAME`: standing while running, ranking and choice at the end.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::api::ConcurrencyExperiment;
use crate::kubectl::follow;
use crate::kubectl::render::list_row;
use crate::kubectl::selection::selection_block;

use super::fixtures::{now, NS};

fn selecting(status: Value) -> ConcurrencyExperiment {
    serde_json::from_value(json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "best", "namespace": NS, "creationTimestamp": "2026-11-30T01:00:00Z"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidates": [
                {"server": "puma", "workers": 1, "threads": 1},
                {"server": "puma", "workers": 2, "threads": 3},
                {"server": "falcon", "workers": 2},
            ],
            "selection": {"duration": "2m", "objective": {"minimize": "memory"}},
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "checks": [{"metric": "queueTime", "quantile": 0.9, "max": "50ms"}],
            },
        },
        "status": status,
    }))
    .expect("a valid experiment")
}

const MIB: f64 = 1048576.0;

fn eliminated() -> Value {
    json!({"at": "2026-11-30T01:02:00Z", "checks": ["queueTime"],
           "message": "Candidate puma 1×1 eliminated after 1 failed analyses against the fresh baseline (queueTime: candidate 230ms, baseline 1ms, limit max 50ms)."})
}

fn variants() -> Value {
    json!([
        {"index": 0, "summary": "puma 1×1", "failedAnalyses": 1, "eliminated": eliminated()},
        {"index": 1, "summary": "puma 2×3", "passedAnalyses": 2,
         "objectiveSamples": [184.0 * MIB, 186.0 * MIB], "headroom": 0.71},
        {"index": 2, "summary": "falcon 2 workers", "passedAnalyses": 2,
         "objectiveSamples": [160.0 * MIB, 162.0 * MIB], "headroom": 0.8},
    ])
}

#[test]
fn while_selecting_the_candidates_stand_in_spec_order_with_their_mean_objective() {
    let e = selecting(json!({
        "phase": "Selecting",
        "selection": {"startedAt": "2026-11-30T01:00:30Z", "variants": variants()},
        "freshBaseline": {"variant": {"deployment": "storefront-fresh-baseline", "summary": "puma 2×4",
                                      "config": {"server": "puma", "workers": 2, "threads": 4}}},
    }));
    assert_eq!(
        selection_block(&e).as_deref(),
        Some(
            "\
Selection:   3 candidates at 10% each against Deployment storefront-fresh-baseline, 2m long; minimize memory, started 2026-11-30T01:00:30Z
  #  CANDIDATE         MEMORY  COST  HEADROOM  ANALYSES  VERDICT
  -  puma 1×1          -       -     -         0 ✓ 1 ✗   ✗ eliminated (queueTime)
  -  puma 2×3          185Mi   -     71%       2 ✓ 0 ✗   running
  -  falcon 2 workers  161Mi   -     80%       2 ✓ 0 ✗   running
  Eliminated: Candidate puma 1×1 eliminated after 1 failed analyses against the fresh baseline (queueTime: candidate 230ms, baseline 1ms, limit max 50ms).
"
        )
    );
    assert_eq!(list_row(&e, now())[8], "3 candidates");
}

#[test]
fn after_the_choice_the_ranking_and_the_choice_are_shown() {
    let e = selecting(json!({
        "phase": "Progressing",
        "selection": {
            "startedAt": "2026-11-30T01:00:30Z", "variants": variants(), "winner": 2,
            "ranking": [
                {"index": 2, "summary": "falcon 2 workers", "config": {"server": "falcon", "workers": 2},
                 "objective": 161.0 * MIB, "cost": 2, "headroom": 0.8, "verdict": "Pass"},
                {"index": 1, "summary": "puma 2×3", "config": {"server": "puma", "workers": 2, "threads": 3},
                 "objective": 185.0 * MIB, "cost": 6, "headroom": 0.71, "verdict": "Pass"},
                {"index": 0, "summary": "puma 1×1", "config": {"server": "puma", "workers": 1, "threads": 1},
                 "cost": 1, "verdict": "Fail", "reason": "eliminated: queueTime"},
            ],
            "message": "Chose falcon 2 workers (memory 161 MiB) over the runner-up puma 2×3 (185 MiB): 13.0% lower.",
        },
    }));
    assert_eq!(
        selection_block(&e).as_deref(),
        Some(
            "\
Selection:   3 candidates at 10% each against the fresh baseline (not deployed), 2m long; minimize memory, started 2026-11-30T01:00:30Z
  #  CANDIDATE         MEMORY  COST  HEADROOM  ANALYSES  VERDICT
  1  falcon 2 workers  161Mi   2     80%       2 ✓ 0 ✗   ✓ survivor
  2  puma 2×3          185Mi   6     71%       2 ✓ 0 ✗   ✓ survivor
  3  puma 1×1          -       1     -         0 ✓ 1 ✗   ✗ eliminated: queueTime
  Eliminated: Candidate puma 1×1 eliminated after 1 failed analyses against the fresh baseline (queueTime: candidate 230ms, baseline 1ms, limit max 50ms).
  Choice:     Chose falcon 2 workers (memory 161 MiB) over the runner-up puma 2×3 (185 MiB): 13.0% lower.
"
        )
    );
    assert_eq!(list_row(&e, now())[8], "falcon 2 workers");
}

#[test]
fn one_candidate_has_no_selection_block() {
    assert_eq!(selection_block(&super::fixtures::progressing()), None);
}

#[test]
fn a_follower_reads_each_candidates_analysis_its_elimination_and_the_choice_once() {
    let start = selecting(json!({
        "phase": "Selecting",
        "selection": {"startedAt": "2026-11-30T01:00:30Z", "variants": [
            {"index": 0, "summary": "puma 1×1"},
            {"index": 1, "summary": "puma 2×3"},
        ]},
    }));
    let queue = |c: f64, verdict: &str| {
        json!([{"name": "queueTime", "query": "q", "limit": "max 50ms", "verdict": verdict,
                "baseline": 0.001, "candidate": c}])
    };
    let measured = selecting(json!({
        "phase": "Selecting",
        "selection": {"startedAt": "2026-11-30T01:00:30Z", "variants": [
            {"index": 0, "summary": "puma 1×1", "failedAnalyses": 1, "eliminated": eliminated(),
             "checks": queue(0.23, "Fail")},
            {"index": 1, "summary": "puma 2×3", "passedAnalyses": 1, "checks": queue(0.002, "Pass")},
        ]},
    }));
    assert_eq!(
        follow::changes(&start, &measured, "01:02:00"),
        "  puma 1×1: analysis 1 against the fresh baseline (0 ✓ 1 ✗)  queueTime 1ms / 230ms ✗
  ✗ Candidate puma 1×1 eliminated after 1 failed analyses against the fresh baseline (queueTime: candidate 230ms, baseline 1ms, limit max 50ms).
  puma 2×3: analysis 1 against the fresh baseline (1 ✓ 0 ✗)  queueTime 1ms / 2ms ✓
"
    );
    // The same status again prints nothing; the choice prints the ranking once.
    assert_eq!(follow::changes(&measured, &measured, "01:02:05"), "");
    let mut chosen = measured.clone();
    let sel = chosen.status.as_mut().unwrap().selection.as_mut().unwrap();
    sel.winner = Some(1);
    sel.message = Some("Chose puma 2×3: the only survivor.".into());
    let text = follow::changes(&measured, &chosen, "01:03:00");
    assert!(text.starts_with("\nSelection:   3 candidates"), "{text}");
    assert!(
        text.ends_with("  Choice:     Chose puma 2×3: the only survivor.\n"),
        "{text}"
    );
    assert_eq!(follow::changes(&chosen, &chosen, "01:03:05"), "");
}

#[test]
fn a_report_draws_every_candidate_the_fresh_baseline_and_the_winner_once() {
    use crate::kubectl::report::history::{variants as drawn, Variant};
    let mut status = json!({
        "phase": "Progressing",
        "selection": {"variants": variants(), "winner": 2,
                      "ranking": [{"index": 2, "summary": "falcon 2 workers", "config": {"server": "falcon", "workers": 2}, "objective": 161.0 * MIB, "verdict": "Pass"}]},
        "freshBaseline": {"variant": {"deployment": "storefront-fresh-baseline", "summary": "puma 2×6", "config": {"server": "puma", "workers": 2, "threads": 6}}},
        "candidate": {"deployment": "storefront-candidate", "summary": "falcon 2 workers", "config": {"server": "falcon", "workers": 2}},
    });
    let e = selecting(status.clone());
    let v: Vec<(String, String)> = drawn(&e).into_iter().map(|(v, d)| (v.label(), d)).collect();
    let names = |v: &[(String, String)]| {
        v.iter()
            .map(|(l, d)| format!("{l}={d}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&v),
        [
            "baseline=storefront",
            "candidate 0: puma 1×1=storefront-candidate-1",
            "candidate 1: puma 2×3=storefront-candidate-2",
            "candidate 2: falcon 2 workers=storefront-candidate-3",
            "fresh baseline=storefront-fresh-baseline",
            "candidate=storefront-candidate",
        ]
    );
    // A winner walking in one of the selection's own Deployments is drawn once.
    status["candidate"]["deployment"] = json!("storefront-candidate-3");
    let e = selecting(status);
    assert!(!drawn(&e).iter().any(|(v, _)| *v == Variant::Candidate));
}

#[test]
fn in_a_selections_report_the_walking_candidate_starts_with_stage_1() {
    use crate::kubectl::report::history::{History, Series, Variant};
    use crate::kubectl::report::page;
    let e = selecting(json!({
        "phase": "Progressing",
        "selection": {"variants": variants(), "winner": 2, "startedAt": "2026-11-30T01:00:00Z"},
        "candidate": {"deployment": "storefront-candidate", "summary": "falcon 2 workers", "config": {"server": "falcon", "workers": 2}},
    }));
    let t0 = 1_795_914_000.0; // 2026-11-30T01:00:00Z
    let every_10s = |from: f64, to: f64| -> Vec<(f64, f64)> {
        (0..)
            .map(|i| from + 10.0 * f64::from(i))
            .take_while(|t| *t <= to)
            .map(|t| (t, 0.05))
            .collect()
    };
    let series = |variant| Series {
        variant,
        query: "q".into(),
        points: Ok(every_10s(t0, t0 + 300.0)),
    };
    let h = History {
        from: "2026-11-30T01:00:00Z".parse().unwrap(),
        to: "2026-11-30T01:05:00Z".parse().unwrap(),
        step: std::time::Duration::from_secs(10),
        prometheus: "p".into(),
        checks: vec![(
            "queueTime".into(),
            vec![series(Variant::Baseline), series(Variant::Candidate)],
        )],
        load: vec![],
        weight: Ok(vec![]),
        // The selection until 01:02:00, stage 1 from then on.
        stage: Ok(every_10s(t0 + 120.0, t0 + 300.0)
            .into_iter()
            .map(|(t, _)| (t, 0.0))
            .collect()),
        verdicts: vec![],
    };
    let html = page::render(&e, &h, now());
    assert!(
        html.contains(r#"data-series="baseline" data-points="31""#),
        "{html}"
    );
    // 01:02:00 to 01:05:00: 19 of its 31 points.
    assert!(
        html.contains(r#"data-series="candidate" data-points="19""#),
        "{html}"
    );
    assert!(html.contains("The candidate&#39;s line starts with stage 1"));
}
