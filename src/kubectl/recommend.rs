//! `recommend DEPLOYMENT --prometheus URL`: size a running Deployment, no experiment needed.
//!
//! Reads the server config back from the pod template (as the operator does for a baseline),
//! measures the I/O share, CPU and I/O seconds per request and the busiest pod's request rate
//! with the operator's own query templates and Prometheus client — from the GVL counters, or
//! where they have no data from standard metrics (container CPU, request-duration sum/count),
//! chosen as the operator chooses (`analysis::choose_times`) — then prints the Amdahl table
//! and the capacity per thread count (`analysis::capacity`).

use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;

use super::capacity::capacity_table;
use super::cli::RecommendArgs;
use super::render::Table;
use super::{PluginError, Session};
use crate::analysis::{
    busiest_pod_rate_template, choose_io_share, choose_times, container_cpu_per_request_template,
    cpu_per_request_template, io_per_request_template, io_share_template, pods_regex, recommend,
    recommendation_table, render, validate_names, wall_per_request_template, ChosenTimes, GvlTimes,
    PerRequest, StandardTimes, TemplateVars, Unit,
};
use crate::api::{format_duration, CapacitySource, MetricNames, MetricsSpec, RenderedServer};
use crate::prometheus::PrometheusClient;
use crate::workload::{app_container, read_baseline};

/// The Deployment as far as the estimate needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub deployment: String,
    pub namespace: String,
    pub container: String,
    pub config: RenderedServer,
    pub replicas: i32,
    pub ready: i32,
    /// The app container's CPU limit, cores.
    pub cpu_limit: Option<f64>,
}

impl Target {
    pub fn from_deployment(d: &Deployment, container: Option<&str>) -> Result<Self, PluginError> {
        let c = app_container(d, container)?;
        let config = read_baseline(d, container, &Default::default())?;
        let cpu_limit = crate::analysis::capacity::cpu_limit(c.resources.as_ref());
        Ok(Target {
            deployment: d.name_any(),
            namespace: d.namespace().unwrap_or_default(),
            container: c.name.clone(),
            config,
            replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            ready: d
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0),
            cpu_limit,
        })
    }
}

/// Shared with the operator's capacity gate.
pub use crate::analysis::capacity::cpu_cores;

/// `--metric requestsTotal=http_requests_total`, `--metric preset=prometheusExporter`: the
/// same fields as `spec.analysis.metrics`, resolved as there and checked against Prometheus'
/// name grammar.
pub fn metric_names(flags: &[String]) -> Result<MetricNames, PluginError> {
    let usage = |e: serde_json::Error| PluginError::Usage(format!("--metric: {e}"));
    let names = serde_json::to_value(MetricNames::default()).map_err(usage)?;
    let mut known: Vec<&str> = vec!["preset"];
    known.extend(
        names
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys().map(String::as_str)),
    );
    let mut spec = serde_json::Map::new();
    for flag in flags {
        let (key, value) = flag
            .split_once('=')
            .ok_or_else(|| PluginError::Usage(format!("--metric {flag:?}: expected FIELD=NAME")))?;
        if !known.contains(&key.trim()) {
            return Err(PluginError::Usage(format!(
                "--metric {flag:?}: unknown field {key:?} (known: {})",
                known.join(", ")
            )));
        }
        spec.insert(key.trim().to_string(), value.trim().into());
    }
    let spec: MetricsSpec = serde_json::from_value(spec.into()).map_err(usage)?;
    let names = spec.resolve();
    validate_names(&names).map_err(|e| {
        PluginError::Usage(format!(
            "--metric: {}",
            e.to_string().replace("spec.analysis.metrics.", "")
        ))
    })?;
    Ok(names)
}

/// What is measured, in the order it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    IoShare,
    CpuPerRequest,
    IoPerRequest,
    BusiestPodRate,
    /// Standard metrics: the container's CPU seconds (cAdvisor) per request.
    ContainerCpuPerRequest,
    /// Standard metrics: the request-duration `_sum / _count`.
    WallPerRequest,
}

impl Quantity {
    pub const ALL: [Quantity; 6] = [
        Quantity::IoShare,
        Quantity::CpuPerRequest,
        Quantity::IoPerRequest,
        Quantity::BusiestPodRate,
        Quantity::ContainerCpuPerRequest,
        Quantity::WallPerRequest,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Quantity::IoShare => "I/O share",
            Quantity::CpuPerRequest => "CPU per request",
            Quantity::IoPerRequest => "I/O per request",
            Quantity::BusiestPodRate => "busiest pod rate",
            Quantity::ContainerCpuPerRequest => "container CPU per request",
            Quantity::WallPerRequest => "wall time per request",
        }
    }
}

/// The queries for the Deployment's pods over `window`, rendered as sent.
pub fn queries(
    target: &Target,
    names: &MetricNames,
    window: Duration,
) -> Result<Vec<(Quantity, String)>, PluginError> {
    let vars = TemplateVars {
        namespace: target.namespace.clone(),
        pods: pods_regex(&target.deployment),
        interval: window,
        window,
        container: target.container.clone(),
    };
    let usage = |e: &dyn std::fmt::Display| PluginError::Usage(e.to_string());
    Quantity::ALL
        .into_iter()
        .map(|q| {
            let template = match q {
                Quantity::IoShare => io_share_template(names),
                Quantity::CpuPerRequest => cpu_per_request_template(names),
                Quantity::IoPerRequest => io_per_request_template(names),
                Quantity::BusiestPodRate => busiest_pod_rate_template(names),
                Quantity::ContainerCpuPerRequest => container_cpu_per_request_template(names),
                Quantity::WallPerRequest => wall_per_request_template(names),
            }
            .map_err(|e| usage(&e))?;
            let promql = render(q.name(), &template, &vars).map_err(|e| usage(&e))?;
            Ok((q, promql))
        })
        .collect()
}

/// The measured values; `None` where the query returned nothing or NaN (0/0: no requests).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// From the GVL counters.
    pub io_share: Option<f64>,
    pub cpu: Option<f64>,
    pub io: Option<f64>,
    pub busiest_pod_rate: Option<f64>,
    /// From standard metrics.
    pub container_cpu: Option<f64>,
    pub wall: Option<f64>,
}

impl Measurement {
    pub fn get(&self, q: Quantity) -> Option<f64> {
        match q {
            Quantity::IoShare => self.io_share,
            Quantity::CpuPerRequest => self.cpu,
            Quantity::IoPerRequest => self.io,
            Quantity::BusiestPodRate => self.busiest_pod_rate,
            Quantity::ContainerCpuPerRequest => self.container_cpu,
            Quantity::WallPerRequest => self.wall,
        }
    }

    fn set(&mut self, q: Quantity, v: Option<f64>) {
        let slot = match q {
            Quantity::IoShare => &mut self.io_share,
            Quantity::CpuPerRequest => &mut self.cpu,
            Quantity::IoPerRequest => &mut self.io,
            Quantity::BusiestPodRate => &mut self.busiest_pod_rate,
            Quantity::ContainerCpuPerRequest => &mut self.container_cpu,
            Quantity::WallPerRequest => &mut self.wall,
        };
        *slot = v.filter(|v| v.is_finite());
    }

    fn standard(&self) -> StandardTimes {
        StandardTimes {
            cpu: self.container_cpu,
            wall: self.wall,
        }
    }

    /// The I/O share the operator would use, and its source.
    pub fn io_share_chosen(&self) -> Option<(f64, CapacitySource)> {
        choose_io_share(self.io_share, Some(self.standard()))
    }

    /// The CPU and I/O seconds per request the operator would use, and their source.
    pub fn times(&self) -> ChosenTimes {
        let exact = GvlTimes {
            cpu: self.cpu,
            io: self.io,
        };
        choose_times(exact, Some(self.standard()))
    }

    /// The quantities whose query returned nothing where the figure they give is missing from
    /// both sources (a query the other source made up for is not missing).
    pub fn missing(&self) -> Vec<Quantity> {
        use Quantity::*;
        let times = self.times();
        let figures: [(bool, &[Quantity]); 4] = [
            (
                self.io_share_chosen().is_some(),
                &[IoShare, ContainerCpuPerRequest, WallPerRequest],
            ),
            (
                times.cpu.is_some(),
                &[CpuPerRequest, ContainerCpuPerRequest],
            ),
            (
                times.io.is_some(),
                &[IoPerRequest, ContainerCpuPerRequest, WallPerRequest],
            ),
            (self.busiest_pod_rate.is_some(), &[BusiestPodRate]),
        ];
        Quantity::ALL
            .into_iter()
            .filter(|q| self.get(*q).is_none())
            .filter(|q| figures.iter().any(|(has, from)| !has && from.contains(q)))
            .collect()
    }
}

/// Runs the queries; a Prometheus error (unreachable, rejected query) ends the measurement.
pub async fn measure(
    client: &PrometheusClient,
    queries: &[(Quantity, String)],
    at: Timestamp,
) -> Result<Measurement, PluginError> {
    let answers =
        futures::future::join_all(queries.iter().map(|(_, q)| client.query_value(q, at))).await;
    let mut m = Measurement::default();
    for ((q, _), answer) in queries.iter().zip(answers) {
        m.set(*q, answer?);
    }
    Ok(m)
}

/// `init`'s sizing note: the I/O share measured for the target (GVL counters, else standard
/// metrics) and the thread count Amdahl's law gives at the spec's default gains, as comment
/// lines for the starter manifest. `None` when no I/O share could be measured.
pub fn sizing_note(m: &Measurement, window: Duration) -> Option<String> {
    let (p, from) = m.io_share_chosen()?;
    let rec = crate::analysis::recommend_from_spec(p, &Default::default())
        .ok()
        .flatten()?;
    let how = match from {
        CapacitySource::GvlCounters => "from the GVL counters",
        CapacitySource::StandardMetrics => {
            "from standard metrics: (wall − CPU) / wall, GVL wait counted as I/O, so it reads \
             high under load"
        }
    };
    let mut out = format!(
        "# Measured over the last {}: I/O share {:.0}% ({how}).\n# Amdahl: {} threads per \
         process (speedup {:.2}×); `kubectl concurrency recommend` shows the table and the \
         capacity.\n",
        format_duration(window),
        p * 100.0,
        rec.threads,
        rec.speedups
            .get(usize::try_from(rec.threads - 1).unwrap_or(0))
            .copied()
            .unwrap_or(1.0),
    );
    if rec.async_server_advised {
        out.push_str("# Above 95% I/O an async server (Falcon) is advised.\n");
    }
    Some(out)
}

/// Settings of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSettings {
    pub prometheus: String,
    pub window: Duration,
    pub min_gain: f64,
    pub async_above: f64,
}

fn req_s(v: f64) -> String {
    format!("{v:.1} req/s")
}

fn cores(c: f64) -> String {
    let s = format!("{c:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", if c == 1.0 { "core" } else { "cores" })
}

/// The whole report, and the quantities whose query returned nothing.
pub fn report(
    target: &Target,
    m: &Measurement,
    queries: &[(Quantity, String)],
    s: &ReportSettings,
) -> (String, Vec<&'static str>) {
    let secs = Unit::Seconds;
    let cfg = &target.config;
    let mut out = format!(
        "Deployment {} in namespace {}, container {}: {} ({}/{} ready), CPU limit {}\n",
        target.deployment,
        target.namespace,
        target.container,
        cfg.summary(),
        target.ready,
        target.replicas,
        target.cpu_limit.map_or("none".to_string(), cores),
    );
    out.push_str(&format!(
        "Measured over the last {} from {}:\n",
        format_duration(s.window),
        s.prometheus
    ));
    let shown = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("no data".to_string(), f);
    let p = m.io_share_chosen();
    let times = m.times();
    let standard = |s: Option<CapacitySource>| s == Some(CapacitySource::StandardMetrics);
    let mut t = Table::new(["", "", ""]).indented("  ");
    t.row([
        "I/O share p".to_string(),
        shown(p.map(|p| p.0), &|v| format!("{:.1}%", v * 100.0)),
        if standard(p.map(|p| p.1)) {
            "(wall − CPU) / wall, standard metrics: GVL wait counted as I/O".into()
        } else {
            "io / (running + io + gvlWait)".into()
        },
    ]);
    let (cpu_note, io_note) = if standard(times.source) {
        (
            "container CPU seconds per request, standard metrics",
            "wall − CPU per request (I/O and GVL wait), standard metrics",
        )
    } else {
        (
            "running (GVL held) seconds per request",
            "I/O wait seconds per request",
        )
    };
    t.row([
        "CPU per request".to_string(),
        shown(times.cpu, &|v| secs.format(v)),
        cpu_note.into(),
    ]);
    t.row([
        "I/O per request".to_string(),
        shown(times.io, &|v| secs.format(v)),
        io_note.into(),
    ]);
    t.row([
        "busiest pod".to_string(),
        shown(m.busiest_pod_rate, &req_s),
        "requests per second".into(),
    ]);
    // The header row of a label/value list is empty: drop it.
    let listing = t.render();
    out.push_str(listing.split_once('\n').map_or("", |(_, rest)| rest));
    if standard(p.map(|p| p.1)) || standard(times.source) {
        out.push_str(
            "  The GVL counters had no data: figures from standard metrics (cAdvisor's CPU, the \
             request-duration sum/count; docs/capacity.md says what they over- and under-count).\n",
        );
    }

    let rec = p.and_then(|(p, _)| recommend(p, s.min_gain, s.async_above));
    out.push('\n');
    match p {
        Some((p, _)) => out.push_str(&recommendation_table(p, s.min_gain, s.async_above)),
        None => out.push_str("Amdahl table: no I/O share measured.\n"),
    }

    out.push('\n');
    match (times.cpu, times.io) {
        (Some(cpu), Some(io)) => out.push_str(&capacity_table(
            &target.config,
            target.cpu_limit,
            PerRequest {
                cpu,
                io,
                ..PerRequest::default()
            },
            m.busiest_pod_rate,
            rec.as_ref().map(|r| r.threads),
            rec.as_ref().map_or(0, |r| r.speedups.len()),
        )),
        _ => out.push_str("Capacity: needs CPU and I/O per request.\n"),
    }

    let absent = m.missing();
    let missing: Vec<(Quantity, &String)> = queries
        .iter()
        .filter(|(q, _)| absent.contains(q))
        .map(|(q, promql)| (*q, promql))
        .collect();
    if !missing.is_empty() {
        out.push_str("\nNo data (the query returned nothing, or NaN for no requests):\n");
        for (q, promql) in &missing {
            out.push_str(&format!("  {}: {promql}\n", q.name()));
        }
    }
    (out, missing.iter().map(|(q, _)| q.name()).collect())
}

pub async fn run(
    session: &Session,
    args: &RecommendArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let names = metric_names(&args.metrics)?;
    let deployment = session.deployment(&args.deployment).await?;
    let mut target = Target::from_deployment(&deployment, args.container.as_deref())?;
    if target.namespace.is_empty() {
        target.namespace = session.namespace.clone();
    }
    let queries = queries(&target, &names, args.window)?;
    let provider = args
        .access
        .provider(&args.prometheus)
        .map_err(PluginError::Usage)?;
    let client = PrometheusClient::for_provider(&provider, args.timeout)?;
    let m = measure(&client, &queries, Timestamp::now()).await?;
    let settings = ReportSettings {
        prometheus: crate::telemetry::redact::url_for_display(&args.prometheus),
        window: args.window,
        min_gain: args.min_gain,
        async_above: args.async_above,
    };
    let (text, missing) = report(&target, &m, &queries, &settings);
    if missing.is_empty() {
        out.write_all(text.as_bytes())?;
        Ok(())
    } else {
        Err(PluginError::NoData {
            report: text,
            missing: missing.into_iter().map(String::from).collect(),
        })
    }
}
