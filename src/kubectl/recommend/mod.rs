//! `recommend DEPLOYMENT --prometheus URL`: size a running Deployment, no experiment needed.
//!
//! Reads the server config back from the pod template (as the operator does for a baseline),
//! measures the I/O share, CPU and I/O seconds per request and the busiest pod's request rate
//! with the operator's own query templates and Prometheus client — from the GVL counters, or
//! where they have no data from standard metrics (container CPU, request-duration sum/count),
//! chosen as the operator chooses (`analysis::choose_times`) — then prints the Amdahl table
//! and the capacity per thread count (`analysis::capacity`).

mod measure;
mod page;

use std::io::Write;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;

use super::cli::RecommendArgs;
use super::{PluginError, Session};
use crate::analysis::validate_names;
use crate::api::{MetricNames, MetricsSpec, RenderedServer};
use crate::prometheus::PrometheusClient;
use crate::workload::{app_container, read_baseline};

pub use measure::{measure, queries, queries_of, Measurement, Quantity};
pub use page::{report, sizing_note, ReportSettings};
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
