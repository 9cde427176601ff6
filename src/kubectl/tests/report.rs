//! `report`: the page drawn from an experiment and a gathered history (pure), the gaps it
//! says instead of drawing, and the whole command against a scripted API server and a canned
//! Prometheus.

use std::time::Duration;

use jiff::Timestamp;

use super::fixtures::*;
use crate::api::Verdict;
use crate::kubectl::cli::{PrometheusAccess, ReportArgs};
use crate::kubectl::report::history::{
    counted, not_yet_counted, stage_starts, Counted, History, Points, Series, Variant,
};
use crate::kubectl::report::svg::segments;
use crate::kubectl::report::{self, page};

fn t(s: &str) -> f64 {
    s.parse::<Timestamp>().unwrap().as_second() as f64
}

/// `v` every 15 s from `a` to `b` (inclusive).
fn flat(a: &str, b: &str, v: f64) -> Points {
    flat_between(t(a), t(b), v)
}

fn series(variant: Variant, points: Result<Points, String>) -> Series {
    Series {
        variant,
        query: "q".into(),
        points,
    }
}

/// A history of `progressing()`: latency for both (the candidate with a gap), queue time's
/// candidate query failed, memory with no data at all, gvlWait for both, the operator's gauges.
fn history() -> History {
    let mut candidate_latency = flat("2026-11-30T01:02:00Z", "2026-11-30T01:07:00Z", 0.073);
    candidate_latency.extend(flat("2026-11-30T01:09:00Z", "2026-11-30T01:12:30Z", 0.074));
    let mut weight = flat("2026-11-30T01:01:00Z", "2026-11-30T01:09:50Z", 33.0);
    weight.extend(flat("2026-11-30T01:10:00Z", "2026-11-30T01:12:30Z", 67.0));
    let mut stage = flat("2026-11-30T01:01:00Z", "2026-11-30T01:09:50Z", 0.0);
    stage.extend(flat("2026-11-30T01:10:00Z", "2026-11-30T01:12:30Z", 1.0));
    let whole = |v| flat("2026-11-30T01:00:00Z", "2026-11-30T01:12:30Z", v);
    History {
        from: "2026-11-30T01:00:00Z".parse().unwrap(),
        to: now(),
        step: Duration::from_secs(15),
        prometheus: "http://prometheus.example:9090".into(),
        checks: vec![
            (
                "latency".into(),
                vec![
                    series(Variant::Baseline, Ok(whole(0.072))),
                    series(Variant::Candidate, Ok(candidate_latency)),
                ],
            ),
            (
                "queueTime".into(),
                vec![
                    series(Variant::Baseline, Ok(whole(0.0017))),
                    series(
                        Variant::Candidate,
                        Err("Prometheus did not answer within 20s".into()),
                    ),
                ],
            ),
            (
                "memory".into(),
                vec![
                    series(Variant::Baseline, Ok(vec![])),
                    series(Variant::Candidate, Ok(vec![])),
                ],
            ),
            (
                "gvlWait".into(),
                vec![
                    series(Variant::Baseline, Ok(whole(0.0))),
                    series(Variant::Candidate, Ok(whole(0.012))),
                ],
            ),
        ],
        load: vec![series(Variant::Candidate, Ok(whole(12.5)))],
        weight: Ok(weight),
        stage: Ok(stage),
        // The operator counted one more analysis (01:02) than status keeps.
        verdicts: vec![
            (
                Verdict::Pass,
                Ok(steps(&[
                    ("2026-11-30T01:01:00Z", 0.0),
                    ("2026-11-30T01:02:00Z", 1.0),
                    ("2026-11-30T01:05:15Z", 2.0),
                    ("2026-11-30T01:11:15Z", 3.0),
                ])),
            ),
            (Verdict::Fail, Ok(whole(0.0))),
            (
                Verdict::Inconclusive,
                Ok(steps(&[
                    ("2026-11-30T01:01:00Z", 0.0),
                    ("2026-11-30T01:06:15Z", 1.0),
                ])),
            ),
        ],
    }
}

/// A counter that takes each value from its time on, every 15 s to the history's end.
fn steps(changes: &[(&str, f64)]) -> Points {
    let mut out = Vec::new();
    for (i, (at, v)) in changes.iter().enumerate() {
        let end = changes
            .get(i + 1)
            .map_or(t("2026-11-30T01:12:30Z"), |n| t(n.0) - 15.0);
        out.extend(flat_between(t(at), end, *v));
    }
    out
}

/// `v` every 15 s from `a` to `b` (inclusive), in seconds.
fn flat_between(a: f64, b: f64, v: f64) -> Points {
    let mut out = Vec::new();
    let mut x = a;
    while x <= b {
        out.push((x, v));
        x += 15.0;
    }
    out
}

/// The traffic chart's figure.
fn traffic_chart(html: &str) -> &str {
    html.split(r#"<figure data-chart="weight">"#)
        .nth(1)
        .and_then(|s| s.split("</figure>").next())
        .unwrap()
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn a_report_charts_every_check_per_variant_with_limits_stages_and_verdicts() {
    let html = page::render(&progressing(), &history(), now());
    // One chart per check, the weight chart and the capacity chart.
    for check in [
        "latency",
        "queueTime",
        "memory",
        "gvlWait",
        "weight",
        "capacity",
    ] {
        assert_eq!(
            count(&html, &format!(r#"<figure data-chart="{check}">"#)),
            1,
            "{check}"
        );
    }
    // Stage boundaries from the operator's gauge, on every chart (6).
    assert_eq!(count(&html, "stage 1/3 · 30%</text>"), 6);
    assert_eq!(count(&html, "stage 2/3 · 70%</text>"), 6);
    assert!(html.contains(&format!(
        r#"<g class="stage" data-at="{}">"#,
        t("2026-11-30T01:10:00Z")
    )));
    // Limits: latency's max and its maxIncrease drawn over the baseline.
    assert!(
        html.contains(r#"<g class="limit max" data-value="0.5">"#),
        "{html}"
    );
    assert!(html.contains(r#"data-series="baseline + 10% (maxIncrease)""#));
    assert!(html.contains(r#"<g class="limit max" data-value="0.15">"#));
    // Each analysis' candidate value as a marker coloured by its check's verdict: latency and
    // gvlWait 3 each, memory 3, queueTime 2 (one had no candidate value); and on the weight
    // line every analysis the operator counted, the one status no longer keeps included.
    assert_eq!(count(&html, r#"<circle class="marker Pass""#), 11 + 3);
    let traffic = traffic_chart(&html);
    assert_eq!(
        count(traffic, r#"<circle class="marker Pass" data-count="1""#),
        3
    );
    assert_eq!(
        count(
            traffic,
            r#"<circle class="marker Inconclusive" data-count="1""#
        ),
        1
    );
    assert_eq!(count(traffic, r#"<circle class="marker Fail""#), 0);
    assert!(
        traffic.contains("<title>1 analysis Pass between 01:01:45 and 01:02:00</title>"),
        "{traffic}"
    );
    // Lines per variant, drawn in segments around the gap, never through it.
    assert!(
        html.contains(r#"<g class="series candidate" data-series="candidate" data-points="36">"#),
        "{html}"
    );
    // What is missing is said, not drawn.
    assert!(
        html.contains("candidate: no data 01:00:00–01:02:00, 01:07:00–01:09:00"),
        "{html}"
    );
    assert!(html.contains("candidate: not drawn — Prometheus did not answer within 20s"));
    assert!(html.contains("baseline: Prometheus has no data in this range"));
    // Every analysis of status, every check, with its exact values.
    assert_eq!(count(&html, r#"<tr class="analysis""#), 12);
    assert!(html.contains(r#"<tr class="analysis" data-at="2026-11-30T01:06:00Z" data-check="queueTime" data-baseline="0.0016" data-candidate="" data-verdict="Inconclusive" data-analysis-verdict="Inconclusive">"#), "{html}");
    assert!(html.contains(r#"data-at="2026-11-30T01:11:00Z" data-check="memory" data-baseline="220200960" data-candidate="204472320" data-verdict="Pass""#));
    assert!(html.contains(r#"<section id="decision" data-action="none"><strong>No decision yet</strong>: Progressing, stage 2/3"#));
    assert!(html.contains("Recommendation: I/O share 52%"));
    // Self-contained: nothing to fetch when it is opened.
    for fetch in ["<script", "<link", " src=", "url(", "@import"] {
        assert!(!html.contains(fetch), "{fetch}");
    }
    assert!(html.starts_with("<!DOCTYPE html>\n"));
}

#[test]
fn a_rolled_back_report_leads_with_its_decision() {
    let html = page::render(&rolled_back(), &history(), now());
    assert!(html.contains(r#"<section id="decision" class="Rollback" data-action="Rollback" data-reason="CheckFailed"><strong>Rolled back</strong> (CheckFailed) at 01:05:02 — Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms"#), "{html}");
    assert!(html.contains(r#"<circle class="marker Fail""#));
    assert!(html.contains(r#"<dd id="phase">RolledBack</dd>"#));
    // The deciding analysis ended after the counter's last scrape (its Fail count never rose
    // in the range): it is marked from status, and says so.
    let traffic = traffic_chart(&html);
    assert_eq!(
        count(traffic, r#"<circle class="marker Fail""#),
        1,
        "{traffic}"
    );
    assert!(
        traffic
            .contains("01:05:00 · analysis Fail (after the operator&#39;s count was last scraped)"),
        "{traffic}"
    );
}

#[test]
fn analyses_status_keeps_are_matched_to_the_count_that_saw_them() {
    let a = |at: &str, verdict: &str| -> crate::api::AnalysisRecord {
        serde_json::from_value(serde_json::json!({
            "at": at, "stageIndex": 0, "weight": 30, "verdict": verdict, "reason": "", "checks": [],
        }))
        .unwrap()
    };
    let c = |at: &str, count| Counted {
        since: 0.0,
        at: t(at),
        count,
    };
    let kept = vec![
        a("2026-11-30T01:01:00Z", "Pass"),
        a("2026-11-30T01:01:10Z", "Pass"),
        a("2026-11-30T01:01:20Z", "Inconclusive"),
        a("2026-11-30T01:01:30Z", "Pass"),
        a("2026-11-30T01:01:40Z", "Fail"),
    ];
    // Two Pass seen by one scrape (with one analysis status no longer keeps, seen earlier),
    // the Inconclusive seen; the last Pass and the Fail after the last scrape.
    let counts = vec![
        (
            Verdict::Pass,
            vec![c("2026-11-30T01:00:30Z", 1), c("2026-11-30T01:01:15Z", 2)],
        ),
        (Verdict::Inconclusive, vec![c("2026-11-30T01:01:25Z", 1)]),
        (Verdict::Fail, vec![]),
    ];
    let unseen: Vec<String> = not_yet_counted(&kept, &counts)
        .iter()
        .map(|a| format!("{} {}", a.at.0, a.verdict.as_str()))
        .collect();
    assert_eq!(
        unseen,
        ["2026-11-30T01:01:30Z Pass", "2026-11-30T01:01:40Z Fail"]
    );
    // A count of another verdict, or one seen before the analysis, is not it.
    let counts = vec![(Verdict::Pass, vec![c("2026-11-30T01:01:35Z", 1)])];
    assert_eq!(not_yet_counted(&kept[4..], &counts).len(), 1);
    assert_eq!(not_yet_counted(&kept[3..4], &counts).len(), 0);
    let counts = vec![(Verdict::Fail, vec![c("2026-11-30T01:01:35Z", 1)])];
    assert_eq!(not_yet_counted(&kept[4..], &counts).len(), 1);
}

#[test]
fn without_the_operators_gauges_stages_and_weights_come_from_status_and_it_says_so() {
    let mut h = history();
    h.stage = Ok(vec![]);
    h.weight = Ok(vec![]);
    let html = page::render(&progressing(), &h, now());
    assert!(html.contains("This Prometheus has no samples of the operator&#39;s gauges"));
    // Stage 1 by its first analysis kept, stage 2 exactly (stageStartedAt).
    assert!(html.contains(&format!(
        r#"<g class="stage" data-at="{}">"#,
        t("2026-11-30T01:05:00Z")
    )));
    assert!(html.contains("stage 1/3 · 30% (by)</text>"));
    assert!(html.contains(&format!(
        r#"<g class="stage" data-at="{}">"#,
        t("2026-11-30T01:10:00Z")
    )));
    assert!(html.contains("(from the analyses in status)"));
}

#[test]
fn a_series_is_cut_at_gaps_and_at_values_that_are_not_numbers() {
    let pts = vec![
        (100.0, 1.0),
        (115.0, 2.0),
        (130.0, f64::NAN),
        (145.0, 3.0),
        (200.0, 4.0),
    ];
    let (runs, gaps) = segments(&pts, 40.0, 300.0, 15.0);
    assert_eq!(
        runs,
        vec![
            vec![(100.0, 1.0), (115.0, 2.0)],
            vec![(145.0, 3.0)],
            vec![(200.0, 4.0)]
        ]
    );
    // Before the first sample, between 145 and 200, after the last: each more than two steps.
    assert_eq!(gaps, vec![(40.0, 100.0), (145.0, 200.0), (200.0, 300.0)]);
    let (runs, gaps) = segments(&[], 0.0, 100.0, 15.0);
    assert!(runs.is_empty());
    assert_eq!(gaps, vec![(0.0, 100.0)]);
}

#[test]
fn analyses_are_counted_where_the_counter_rises_and_after_a_restart() {
    let c = |since, at, count| Counted { since, at, count };
    // Born during the range at 1 (an analysis before its first scrape), +2 within one step,
    // the operator restarted (down to 0, then 1), a missing sample skipped.
    let points = vec![
        (30.0, 1.0),
        (45.0, 1.0),
        (60.0, 3.0),
        (75.0, 0.0),
        (90.0, f64::NAN),
        (105.0, 1.0),
    ];
    assert_eq!(
        counted(&points, 0.0),
        vec![c(0.0, 30.0, 1), c(45.0, 60.0, 2), c(75.0, 105.0, 1)]
    );
    assert!(counted(&[(0.0, 0.0), (15.0, 0.0)], 0.0).is_empty());
}

#[test]
fn without_the_operators_count_the_analyses_in_status_are_marked() {
    let mut h = history();
    for (_, p) in &mut h.verdicts {
        *p = Err("HTTP 503".into());
    }
    let html = page::render(&progressing(), &h, now());
    let traffic = traffic_chart(&html);
    assert_eq!(count(traffic, r#"<circle class="marker Pass""#), 2);
    assert_eq!(count(traffic, r#"<circle class="marker Inconclusive""#), 1);
    assert!(html.contains("The operator&#39;s count of analyses could not be read (HTTP 503)"));
}

#[test]
fn stages_begin_where_the_gauge_changes() {
    let g = vec![
        (10.0, 0.0),
        (20.0, 0.0),
        (30.0, 1.0),
        (40.0, f64::NAN),
        (50.0, 2.0),
    ];
    assert_eq!(stage_starts(&g), vec![(10.0, 0), (30.0, 1), (50.0, 2)]);
}

/// The API calls of `report`: the experiment, then its target (for the app container).
fn experiment_then_target() -> Vec<Exchange> {
    vec![
        Exchange::new(
            "GET",
            &exp_path("storefront-threads"),
            200,
            &progressing_json(),
        ),
        Exchange::new(
            "GET",
            &format!("{DEPLOYMENTS}/storefront"),
            200,
            &deployment_json(None),
        ),
    ]
}

fn args(url: &str) -> ReportArgs {
    ReportArgs {
        name: "storefront-threads".into(),
        prometheus: Some(url.into()),
        output: Some("-".into()),
        timeout: Duration::from_secs(5),
        access: PrometheusAccess {
            prometheus_headers: vec!["X-Scope-OrgID: team-a".into()],
            ..Default::default()
        },
    }
}

#[tokio::test]
async fn report_reads_the_experiment_and_redraws_each_check_from_prometheus() {
    let (url, queries) = canned_prometheus(vec![
        ("histogram_quantile(0.99", Some(0.08)),
        ("histogram_quantile(0.9,", Some(0.002)),
        ("container_memory_working_set_bytes", None),
        ("concurrency_experiment_weight", Some(67.0)),
        ("concurrency_experiment_stage_index", Some(1.0)),
        ("concurrency_experiment_analyses_total", Some(2.0)),
        ("ruby_gvl_wait_seconds_total", Some(0.01)),
        ("max(sum by (pod)", Some(9.5)),
    ])
    .await;
    let (session, seen, server) = scripted(experiment_then_target());
    let mut out = Vec::new();
    report::run(&session, &args(&url), &mut out).await.unwrap();
    server.abort();
    assert_eq!(
        lines(&seen),
        [
            format!("GET {}", exp_path("storefront-threads")),
            format!("GET {DEPLOYMENTS}/storefront")
        ]
    );
    let html = text(out);
    let queries = queries.lock().unwrap().clone();
    // Four checks and the load for baseline and candidate, two of the operator's gauges and
    // its count of analyses per verdict.
    assert_eq!(queries.len(), 4 * 2 + 2 + 2 + 3, "{queries:#?}");
    assert!(queries.iter().any(|q| q.starts_with(r#"sum(concurrency_experiment_analyses_total{experiment="storefront-threads",namespace="shop",verdict="Fail"}) or sum("#)), "{queries:#?}");
    let baseline = queries
        .iter()
        .filter(|q| q.contains(r#"namespace="shop",pod=~"^storefront-["#))
        .count();
    let candidate = queries
        .iter()
        .filter(|q| {
            q.contains(r#"pod=~"^storefront\\-candidate-["#)
                || q.contains(r#"pod=~"^storefront-candidate-["#)
        })
        .count();
    assert_eq!((baseline, candidate), (5, 5), "{queries:#?}");
    // The memory series name the app container read from the Deployment.
    assert!(
        queries.iter().any(|q| q.contains(r#"container="web""#)),
        "{queries:#?}"
    );
    assert!(html.contains(r#"<g class="series baseline" data-series="baseline""#));
    assert!(html.contains("baseline: Prometheus has no data in this range"));
    assert!(html.contains("stage 2/3 · 70%</text>"), "{html}");
    assert!(html.contains("(from the operator&#39;s gauge)"));
}

#[tokio::test]
async fn report_against_an_unreachable_prometheus_says_how_to_reach_one() {
    let (session, _, server) = scripted(experiment_then_target());
    let e = report::run(&session, &args("http://127.0.0.1:9"), &mut Vec::new())
        .await
        .unwrap_err();
    server.abort();
    let e = e.to_string();
    assert!(e.starts_with("Prometheus is unreachable"), "{e}");
    assert!(
        e.contains("pass --prometheus with an address this machine reaches"),
        "{e}"
    );
}

#[test]
fn report_is_a_command() {
    use clap::Parser;
    let cli = crate::kubectl::Cli::try_parse_from([
        "kubectl-concurrency",
        "report",
        "storefront-threads",
        "--prometheus",
        "http://localhost:9090",
        "-o",
        "r.html",
    ])
    .unwrap();
    let crate::kubectl::Command::Report(a) = cli.command else {
        panic!("not report")
    };
    assert_eq!(a.output.unwrap().to_str(), Some("r.html"));
}
