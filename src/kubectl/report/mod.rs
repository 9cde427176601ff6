//! `kubectl concurrency report NAME`: the whole experiment as one self-contained HTML file —
//! each check's baseline and candidate (every variant of a selection) over the experiment's
//! time range, limits, stage boundaries and the weight in force, each analysis' verdict, the
//! capacity gate against the observed load, the ranking and the decision.
//!
//! The history is read back from Prometheus with the queries the analyses ran (rendered by the
//! operator's own code for each variant's pods), so a report can be made after the experiment
//! ended, as long as Prometheus keeps the data; what it no longer has is said, not drawn.
//! [`gather`] is the I/O; [`page::render`] is a pure function of what it gathered.

pub mod history;
pub mod page;
mod sections;
pub mod svg;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use futures::{stream, StreamExt};
use jiff::Timestamp;
use kube::ResourceExt;

use crate::analysis::{
    busiest_pod_rate_template, check_query, is_headroom, pods_regex, render as render_template,
    TemplateVars,
};
use crate::api::{parse_duration, ConcurrencyExperiment, Verdict};
use crate::prometheus::{PrometheusClient, PrometheusError};

use super::cli::{PrometheusAccess, ReportArgs};
use super::{PluginError, Session};
use history::{operator_query, range, variants, History, Series, Variant};

/// Range queries in flight at once (the client allows 4 per endpoint).
const IN_FLIGHT: usize = 4;

pub async fn run(
    session: &Session,
    args: &ReportArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let exp = session.experiment(&args.name).await?;
    let (html, history) = make(
        session,
        &exp,
        args.prometheus.as_deref(),
        &args.access,
        args.timeout,
    )
    .await?;
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.html", exp.name_any())));
    if path.as_os_str() == "-" {
        out.write_all(html.as_bytes())?;
        return Ok(());
    }
    std::fs::write(&path, &html)?;
    let drawn = history
        .checks
        .iter()
        .flat_map(|(_, s)| s)
        .filter(|s| s.points.as_ref().is_ok_and(|p| !p.is_empty()))
        .count();
    let all: usize = history.checks.iter().map(|(_, s)| s.len()).sum();
    writeln!(
        out,
        "wrote {} ({} KiB): {} checks, {drawn} of {all} series with data from {}, {} analyses",
        path.display(),
        html.len().div_ceil(1024),
        history.checks.len(),
        history.prometheus,
        exp.status.as_ref().map_or(0, |s| s.analyses.len())
    )?;
    Ok(())
}

/// The report of `exp` (the page and what it was drawn from): Prometheus at `prometheus`, else
/// the experiment's own URL, with the spec's headers unless `access` gives them again.
/// `session`'s namespace must be the experiment's (its target is read there).
pub async fn make(
    session: &Session,
    exp: &ConcurrencyExperiment,
    prometheus: Option<&str>,
    access: &PrometheusAccess,
    timeout: Duration,
) -> Result<(String, History), PluginError> {
    let source = &exp.spec.analysis.prometheus;
    let url = match (prometheus, source.url.is_empty()) {
        (Some(u), _) => u.to_string(),
        (None, false) => source.url.clone(),
        (None, true) => {
            return Err(PluginError::Usage(
                "the experiment names no Prometheus URL (it uses the operator's default): pass --prometheus URL".into(),
            ))
        }
    };
    let mut access = access.clone();
    // The spec's headers (a tenant for Mimir/Thanos) unless given again on the command line.
    for (k, v) in &source.headers {
        let given = access.prometheus_headers.iter().any(|h| {
            h.split(':')
                .next()
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(k))
        });
        if !given {
            access.prometheus_headers.push(format!("{k}: {v}"));
        }
    }
    let provider = access.provider(&url).map_err(PluginError::Usage)?;
    let client = PrometheusClient::for_provider(&provider, timeout)?;
    // The app container names cAdvisor's series; the target may be gone (then the spec's).
    let container = match session.deployment(&exp.spec.target_ref.name).await {
        Ok(d) => crate::workload::app_container(&d, exp.spec.container.as_deref())
            .map(|c| c.name.clone())
            .unwrap_or_default(),
        Err(_) => exp.spec.container.clone().unwrap_or_default(),
    };
    let now = Timestamp::now();
    let (history, no_answer) = gather(&client, exp, &container, now).await;
    // Prometheus not reachable at all: say so instead of writing a page of "not drawn".
    if let Some(e) = no_answer {
        return Err(PluginError::Usage(format!(
            "{e} (the experiment's URL is the one the operator uses in the cluster: pass --prometheus with an address this machine reaches, e.g. through kubectl port-forward)"
        )));
    }
    Ok((page::render(exp, &history, now), history))
}

/// A range query's points or its error as the page says it, and whether the error is that
/// Prometheus gave no answer at all (unreachable, or not within the timeout).
fn said(r: Result<history::Points, PrometheusError>) -> (Result<history::Points, String>, bool) {
    let down = matches!(
        r,
        Err(PrometheusError::Unreachable(_) | PrometheusError::Timeout(_))
    );
    (r.map_err(|e| e.to_string()), down)
}

/// Everything the report draws from Prometheus for the experiment's time range, and the
/// error of a Prometheus that answered none of its queries.
pub async fn gather(
    client: &PrometheusClient,
    exp: &ConcurrencyExperiment,
    container: &str,
    now: Timestamp,
) -> (History, Option<String>) {
    let (from, to, step) = range(exp, now);
    let interval = parse_duration("spec.analysis.interval", &exp.spec.analysis.interval)
        .unwrap_or(Duration::from_secs(60));
    let ns = exp.namespace().unwrap_or_default();
    let vars = |deployment: &str| TemplateVars {
        namespace: ns.clone(),
        pods: pods_regex(deployment),
        interval,
        container: container.to_string(),
        // A fit over the stage (memoryGrowth) is drawn over one interval at each step.
        window: interval,
    };
    let variants = variants(exp);
    let names = exp.spec.analysis.metrics.resolve();

    // Render every query first (a Summary is looked up at the range's end), then run them.
    let mut wanted: Vec<(Option<String>, Variant, Result<String, String>)> = Vec::new();
    for check in &exp.spec.analysis.checks {
        if is_headroom(check) {
            continue;
        }
        for (variant, deployment) in &variants {
            let q = check_query(client, check, &names, &vars(deployment), variant.role(), to).await;
            wanted.push((Some(check.display_name()), variant.clone(), q));
        }
    }
    let load_template = busiest_pod_rate_template(&names).map_err(|e| e.to_string());
    for (variant, deployment) in &variants {
        let q = load_template.clone().and_then(|t| {
            render_template("load", &t, &vars(deployment)).map_err(|e| e.to_string())
        });
        wanted.push((None, variant.clone(), q));
    }
    // A query that could not be rendered was not sent: not a sign of Prometheus being down.
    let fetch = |q: Result<String, String>| async move {
        match q {
            Ok(q) => {
                let (points, down) = said(client.query_range(&q, from, to, step).await);
                (q, points, down)
            }
            Err(e) => (String::new(), Err(e), false),
        }
    };
    // Collected first: a stream over a borrowing closure is not provably `Send` (rustc's
    // higher-ranked lifetime limitation), and the dashboard makes reports on spawned tasks.
    let fetches: Vec<_> = wanted.iter().map(|(_, _, q)| fetch(q.clone())).collect();
    let results: Vec<(String, Result<history::Points, String>, bool)> =
        stream::iter(fetches).buffered(IN_FLIGHT).collect().await;
    let mut down = results.iter().map(|r| r.2).collect::<Vec<_>>();
    let mut checks: Vec<(String, Vec<Series>)> = exp
        .spec
        .analysis
        .checks
        .iter()
        .map(|c| (c.display_name(), Vec::new()))
        .collect();
    let mut load = Vec::new();
    for ((check, variant, _), (query, points, _)) in wanted.into_iter().zip(results) {
        let series = Series {
            variant,
            query,
            points,
        };
        match check {
            Some(name) => {
                if let Some((_, list)) = checks.iter_mut().find(|(n, _)| *n == name) {
                    list.push(series);
                }
            }
            None => load.push(series),
        }
    }
    let operator = |aggregate: &str, metric: &str, extra: String| {
        let q = operator_query(aggregate, metric, exp, &extra);
        async move { said(client.query_range(&q, from, to, step).await) }
    };
    let counter = |verdict: Verdict| {
        let extra = format!(r#",verdict="{}""#, verdict.as_str());
        operator("sum", "concurrency_experiment_analyses_total", extra)
    };
    let (
        (weight, weight_down),
        (stage, stage_down),
        (pass, pass_down),
        (fail, fail_down),
        (inconclusive, inconclusive_down),
    ) = futures::join!(
        operator(
            "max",
            "concurrency_experiment_weight",
            r#",kind="effective""#.into()
        ),
        operator("max", "concurrency_experiment_stage_index", String::new()),
        counter(Verdict::Pass),
        counter(Verdict::Fail),
        counter(Verdict::Inconclusive),
    );
    down.extend([
        weight_down,
        stage_down,
        pass_down,
        fail_down,
        inconclusive_down,
    ]);
    let no_answer = down
        .iter()
        .all(|d| *d)
        .then(|| weight.as_ref().err().cloned())
        .flatten();
    let history = History {
        from,
        to,
        step,
        prometheus: client.url().to_string(),
        checks,
        load,
        weight,
        stage,
        verdicts: vec![
            (Verdict::Pass, pass),
            (Verdict::Fail, fail),
            (Verdict::Inconclusive, inconclusive),
        ],
    };
    (history, no_answer)
}
