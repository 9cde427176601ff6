//! `init DEPLOYMENT --threads N | --server falcon --workers W`: a starter experiment.
//!
//! The target's current config is read back (as a comment, so the reader sees baseline and
//! candidate side by side). With `--prometheus` the starter checks' series are looked up for
//! the target's pods exactly as the operator's pre-flight does (`analysis::preflight`): only
//! checks whose series exist are written; the others are written commented out, and stderr
//! says what is missing, who writes it and what to do instead — the operator would refuse the
//! experiment (`Invalid`) for the same reason. Without `--prometheus` it writes the checks a
//! yabeda-rails app (or prometheus_exporter, with `--preset`) has on Kubernetes: latency,
//! memory, errors; never `gvlWait`, whose series no published gem writes.

use jiff::Timestamp;
use std::io::Write;

use super::cli::InitArgs;
use super::recommend::{measure, sizing_note};
use super::{PluginError, Session};
use crate::analysis::preflight::{self, Finding, Target, Windows};
use crate::analysis::reach;
use crate::api::Analysis;
use crate::prometheus::PrometheusClient;
use crate::workload::{app_container, read_baseline};

pub mod manifest;

pub use manifest::{
    candidate, check_of, default_name, manifest, starter_analysis, starter_stages, starters,
    Starter, Starting, PLACEHOLDER_PROMETHEUS,
};

/// The I/O-share measurement's range: wider than the 1m interval, so a quiet minute still
/// measures.
const PROBE_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// The pre-flight's name for the capacity gate's needs (`analysis::preflight::plan`).
const CAPACITY_GATE: &str = "capacity gate (maxPredictedUtilization)";

/// What the probe found: per starter (by position), and what to tell on stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub data: Vec<Finding>,
    pub gate_off: Option<String>,
    /// One line per check (or the request count, or the capacity gate) not found.
    pub notes: Vec<String>,
}

/// The operator's pre-flight lookup for the starter checks on the target's pods.
pub async fn probe(
    client: &PrometheusClient,
    analysis: &Analysis,
    starters: &[Starter],
    target: &Target,
    at: Timestamp,
) -> Result<Probed, PluginError> {
    let plan = preflight::plan(analysis, target).map_err(|e| PluginError::Usage(e.to_string()))?;
    let found = preflight::look_up(client, &plan, at).await?;
    let findings = preflight::judge(&plan, &found, analysis.metrics.preset);
    let of = |name: &str| {
        findings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
    };
    // A queue time whose series exist but whose clock is whole seconds cannot judge what the
    // starter's 50 ms / +50 % are for: written commented out, as a check without data.
    let clock = match of("queueTime") {
        Some(Finding::Found) => preflight::queue_clock(client, analysis, target, at).await,
        _ => None,
    };
    let mut findings = findings;
    if let Some(clock) = clock {
        for (name, f) in findings.iter_mut() {
            if name == "queueTime" {
                *f = Finding::Missing(clock.describe());
            }
        }
    }
    let of = |name: &str| {
        findings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
    };
    let mut data = Vec::new();
    for st in starters {
        let name = check_of(st)?.display_name();
        data.push(of(&name).unwrap_or(Finding::Found));
    }
    let notes = findings
        .iter()
        .filter_map(|(check, f)| match f {
            Finding::Found => None,
            Finding::Missing(m) => Some(format!("not written: check {check}: {m}")),
            Finding::Unknown(m) => {
                Some(format!("not written (cannot tell yet): check {check}: {m}"))
            }
        })
        .collect();
    let gate_off = match of(CAPACITY_GATE) {
        Some(Finding::Missing(m)) => Some(format!("The capacity gate is off: {m}")),
        _ => None,
    };
    Ok(Probed {
        data,
        gate_off,
        notes,
    })
}

/// How the starter's stages fall short of the data its written checks need at the target's
/// measured request rate (none when no rate was measured).
pub fn reach_notes(analysis: &Analysis, data: &[Finding], rate: Option<f64>) -> Vec<String> {
    let Some(rate) = rate else {
        return Vec::new();
    };
    let mut written = analysis.clone();
    written.checks = analysis
        .checks
        .iter()
        .zip(data)
        .filter(|(_, f)| **f == Finding::Found)
        .map(|(c, _)| c.clone())
        .collect();
    let stages = starter_stages();
    reach::notes(
        &reach::Plan {
            analysis: &written,
            stages: &stages,
        },
        rate,
    )
}

pub async fn run(
    session: &Session,
    args: &InitArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let deployment = session.deployment(&args.deployment).await?;
    let container = app_container(&deployment, args.container.as_deref())?
        .name
        .clone();
    let baseline = read_baseline(&deployment, Some(&container), &Default::default())?;
    let candidate = candidate(args, &baseline)?;
    let probed = match &args.prometheus {
        None => None,
        Some(url) => {
            let provider = args.access.provider(url).map_err(PluginError::Usage)?;
            let client =
                PrometheusClient::for_provider(&provider, crate::prometheus::DEFAULT_TIMEOUT)?;
            let starters = starters(&candidate);
            let analysis = starter_analysis(url, args.preset, &starters)?;
            let target = Target {
                namespace: session.namespace.clone(),
                deployment: args.deployment.clone(),
                container: container.clone(),
                windows: Windows::default(),
            };
            let now = Timestamp::now();
            let p = probe(&client, &analysis, &starters, &target, now).await?;
            for note in &p.notes {
                eprintln!("{note}");
            }
            // The thread count the measured I/O share suggests (the standard metrics' where
            // the GVL counters have none), beside the candidate the flags chose.
            let mut measured =
                super::recommend::Target::from_deployment(&deployment, Some(&container))?;
            measured.namespace = session.namespace.clone();
            let mut asked = super::recommend::Quantity::ALL.to_vec();
            asked.push(super::recommend::Quantity::TotalRate);
            let names = analysis.metrics.resolve();
            let queries = super::recommend::queries_of(&measured, &names, PROBE_WINDOW, &asked)?;
            let m = measure(&client, &queries, now).await?;
            let reach = reach_notes(&analysis, &p.data, m.total_rate);
            for note in &reach {
                eprintln!("warning: {note}");
            }
            Some((p, sizing_note(&m, PROBE_WINDOW), reach))
        }
    };
    let (data, gate_off, sizing, reach) = match probed {
        Some((p, sizing, reach)) => (Some(p.data), p.gate_off, sizing, reach),
        None => (None, None, None, Vec::new()),
    };
    let starting = Starting {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| default_name(&args.deployment, &candidate)),
        namespace: session.namespace.clone(),
        deployment: args.deployment.clone(),
        container,
        baseline,
        candidate,
        prometheus: args.prometheus.clone(),
        preset: args.preset,
        data,
        gate_off,
        sizing,
        reach,
    };
    out.write_all(manifest(&starting).as_bytes())?;
    Ok(())
}
