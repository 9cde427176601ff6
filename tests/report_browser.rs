//! `kubectl concurrency report`'s page in a real browser (headless Chromium): it opens from a
//! file with no request at all, every check has a drawn chart with the stage boundaries, the
//! decision reads as status has it, and every analysis of status is in the table with its
//! values. A screenshot is kept in artifacts/browser/.

mod browser;

use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

use concurrency_operator::api::Verdict;
use concurrency_operator::kubectl::report::history::{History, Points, Series, Variant};
use concurrency_operator::kubectl::report::page;

fn ts(s: &str) -> f64 {
    s.parse::<Timestamp>().unwrap().as_second() as f64
}

/// `f(t)` every 10 s from `a` to `b`.
fn line(a: &str, b: &str, f: impl Fn(f64) -> f64) -> Points {
    let (a, b) = (ts(a), ts(b));
    let mut out = Vec::new();
    let mut t = a;
    while t <= b {
        out.push((t, f(t - a)));
        t += 10.0;
    }
    out
}

fn history() -> History {
    let series = |variant, points| Series {
        variant,
        query: "q".into(),
        points: Ok(points),
    };
    History {
        from: "2026-12-01T10:00:00Z".parse().unwrap(),
        to: "2026-12-01T10:01:41Z".parse().unwrap(),
        step: Duration::from_secs(10),
        prometheus: "http://127.0.0.1:9090".into(),
        checks: vec![
            (
                "latency".into(),
                vec![
                    series(
                        Variant::Baseline,
                        line("2026-12-01T10:00:00Z", "2026-12-01T10:01:40Z", |_| 0.065),
                    ),
                    series(
                        Variant::Candidate,
                        line("2026-12-01T10:00:30Z", "2026-12-01T10:01:30Z", |_| 0.067),
                    ),
                ],
            ),
            (
                "queueTime".into(),
                vec![
                    series(
                        Variant::Baseline,
                        line("2026-12-01T10:00:00Z", "2026-12-01T10:01:40Z", |_| 0.002),
                    ),
                    series(
                        Variant::Candidate,
                        line("2026-12-01T10:00:30Z", "2026-12-01T10:01:30Z", |t| {
                            0.005 * t
                        }),
                    ),
                ],
            ),
        ],
        load: vec![],
        weight: Ok(line("2026-12-01T10:00:20Z", "2026-12-01T10:01:20Z", |_| {
            33.0
        })),
        stage: Ok(line("2026-12-01T10:00:20Z", "2026-12-01T10:01:20Z", |_| {
            0.0
        })),
        // The operator's count: a pass by 10:01:00, a failure by 10:01:20.
        verdicts: vec![
            (
                Verdict::Pass,
                Ok(line("2026-12-01T10:00:20Z", "2026-12-01T10:01:20Z", |t| {
                    if t >= 40.0 {
                        1.0
                    } else {
                        0.0
                    }
                })),
            ),
            (
                Verdict::Fail,
                Ok(line("2026-12-01T10:00:20Z", "2026-12-01T10:01:20Z", |t| {
                    if t >= 60.0 {
                        1.0
                    } else {
                        0.0
                    }
                })),
            ),
            (
                Verdict::Inconclusive,
                Ok(line("2026-12-01T10:00:20Z", "2026-12-01T10:01:20Z", |_| {
                    0.0
                })),
            ),
        ],
    }
}

#[tokio::test]
async fn the_report_opens_offline_with_a_chart_per_check_and_the_status_values() {
    if !browser::available("report_browser") {
        return;
    }
    let exp = browser::experiment();
    let html = page::render(&exp, &history(), "2026-12-01T10:05:00Z".parse().unwrap());
    let file = browser::artifacts().join("report.html");
    std::fs::write(&file, &html).unwrap();

    let b = browser::Browser::start().await;
    b.open(&format!("file://{}", file.display())).await;
    let seen: Value = b
        .eval(
            r#"
            const figures = [...document.querySelectorAll('figure[data-chart]')];
            return {
              charts: figures.map(f => {
                const svg = f.querySelector('svg').getBoundingClientRect();
                return {
                  id: f.dataset.chart,
                  width: svg.width, height: svg.height,
                  drawn: f.querySelectorAll('g.series path, g.series circle').length,
                  stages: [...f.querySelectorAll('g.stage text')].map(t => t.textContent),
                  limits: [...f.querySelectorAll('g.limit text')].map(t => t.textContent),
                  marks: [...f.querySelectorAll('circle.marker')].filter(c => c.getBoundingClientRect().width > 0).map(c => c.classList[1]),
                };
              }),
              decision: document.getElementById('decision').innerText,
              rows: [...document.querySelectorAll('tr.analysis')].map(r => [r.dataset.at, r.dataset.check, r.dataset.baseline, r.dataset.candidate, r.dataset.verdict]),
              resources: performance.getEntriesByType('resource').map(e => e.name),
            };
            "#,
        )
        .await;
    let shot = b.screenshot("report").await;
    eprintln!("screenshot: {}", shot.display());
    b.quit().await;

    // Opened from a file, it fetched nothing.
    assert_eq!(seen["resources"], json!([]), "{seen:#}");
    let charts = seen["charts"].as_array().unwrap();
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["weight", "latency", "queueTime"], "{seen:#}");
    for c in charts {
        // Laid out at a readable size, with lines drawn and the stage boundary on it.
        assert!(c["width"].as_f64().unwrap() > 400.0, "{c:#}");
        assert!(c["height"].as_f64().unwrap() > 100.0, "{c:#}");
        assert!(c["drawn"].as_u64().unwrap() >= 1, "{c:#}");
        assert_eq!(c["stages"], json!(["stage 1/3 · 30%"]), "{c:#}");
    }
    assert_eq!(charts[2]["limits"], json!(["max 50ms"]), "{seen:#}");
    // Each analysis' verdict on the traffic line (from the operator's count), drawn.
    assert_eq!(charts[0]["marks"], json!(["Pass", "Fail"]), "{seen:#}");
    let decision = seen["decision"].as_str().unwrap();
    assert!(
        decision.starts_with("Rolled back (CheckFailed) at 10:01:21 — queueTime: candidate 412.5ms is above max 50ms"),
        "{decision}"
    );
    // Every analysis of status, every check, with status' values.
    let status = exp.status.unwrap();
    let mut want = Vec::new();
    for a in &status.analyses {
        for c in &a.checks {
            want.push(json!([
                a.at.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                c.name,
                c.baseline.unwrap().to_string(),
                c.candidate.unwrap().to_string(),
                c.verdict.as_str()
            ]));
        }
    }
    assert_eq!(seen["rows"], json!(want));
}

/// The demo's reports (scripts/test runs this after `e2e/demo`): each of its three experiments'
/// report opens in Chromium from its file with no request, with a drawn chart per check and a
/// decision. `DEMO_REPORTS` names the directory (default: artifacts/demo).
#[tokio::test]
#[ignore = "needs the demo's reports (scripts/test runs it after e2e/demo)"]
async fn the_demos_reports_open_offline() {
    let dir = std::env::var("DEMO_REPORTS").map_or_else(
        |_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts/demo"),
        std::path::PathBuf::from,
    );
    let b = browser::Browser::start().await;
    for name in ["fewer-threads", "one-thread", "best-config"] {
        let file = dir.join(format!("{name}.html"));
        assert!(
            file.exists(),
            "{} missing: did e2e/demo run?",
            file.display()
        );
        b.open(&format!("file://{}", file.display())).await;
        let seen = b
            .eval(
                r#"
                return {
                  resources: performance.getEntriesByType('resource').map(e => e.name),
                  checks: [...document.querySelectorAll('section.check')].map(s => [
                    s.dataset.check,
                    s.querySelectorAll('g.series path, g.series circle').length,
                    s.querySelector('svg').getBoundingClientRect().width,
                  ]),
                  decision: document.getElementById('decision').dataset.action,
                  rows: document.querySelectorAll('tr.analysis').length,
                  verdicts: document.querySelectorAll('figure[data-chart="weight"] circle.marker').length,
                };
                "#,
            )
            .await;
        b.screenshot(&format!("demo-{name}")).await;
        assert_eq!(seen["resources"], json!([]), "{name}: {seen:#}");
        let checks = seen["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 5, "{name}: {seen:#}");
        assert!(
            seen["verdicts"].as_u64().unwrap() > 0,
            "{name}: no analysis marked on the traffic chart: {seen:#}"
        );
        for c in checks {
            assert!(c[1].as_u64().unwrap() > 0, "{name}: nothing drawn for {c}");
            assert!(c[2].as_f64().unwrap() > 400.0, "{name}: {c}");
        }
        let want = if name == "one-thread" {
            "Rollback"
        } else {
            "Promote"
        };
        assert_eq!(seen["decision"], want, "{name}: {seen:#}");
        assert!(seen["rows"].as_u64().unwrap() > 0, "{name}: {seen:#}");
    }
    b.quit().await;
}
