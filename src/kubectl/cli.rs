//! The plugin's command line. kubectl runs `kubectl-concurrency ARGS` for
//! `kubectl concurrency ARGS`, so the usage is written as the latter.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::api::MetricPreset;
use crate::cli::{duration, share};
use crate::prometheus::provider::{Auth, Provider, Tls};

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-concurrency",
    bin_name = "kubectl concurrency",
    version,
    about = "Follow and steer ConcurrencyExperiments; size a running Deployment from Prometheus"
)]
pub struct Cli {
    /// Namespace; default: the kubeconfig context's namespace.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// kubeconfig context to use; default: the current context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// User to impersonate, as kubectl's --as (e.g. system:serviceaccount:shop:viewer).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate; repeatable, as kubectl's --as-group.
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_groups: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show an experiment (phase, stage, weights, the latest analysis, decision,
    /// recommendation), or one line per experiment in the namespace.
    Get(GetArgs),
    /// Approve the hold in place: an inconclusive pause or the manual promotion.
    Approve(NameArg),
    /// Roll back now.
    Abort(NameArg),
    /// Start a rolled-back experiment again from its first stage.
    Retry(NameArg),
    /// Hold the current stage (spec.paused: true); analyses keep running.
    Pause(NameArg),
    /// Continue an experiment paused with `pause` (spec.paused: false).
    Resume(NameArg),
    /// Every analysis kept in status, and the decision.
    History(NameArg),
    /// Measure a running Deployment (no experiment needed): I/O share, CPU and I/O per
    /// request, the Amdahl thread table and the capacity per thread count.
    Recommend(RecommendArgs),
    /// Print a starter ConcurrencyExperiment for a Deployment.
    Init(InitArgs),
    /// Write the whole experiment as one HTML file (charts per check from Prometheus, stages,
    /// weights, verdicts, capacity, ranking, decision); opens with no network.
    Report(ReportArgs),
    /// Serve a local, read-only web page of every experiment the kubeconfig can see, live,
    /// with each one's report.
    Dashboard(DashboardArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// Address to listen on; anything but loopback shows the experiments to whoever reaches it.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Only the namespace of `-n` (or the context's), not every namespace the kubeconfig can list.
    #[arg(long = "only-namespace")]
    pub namespaced: bool,
    /// Prometheus base URL for the reports, as this machine reaches it; default: each
    /// experiment's.
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    /// Timeout of each Prometheus query of a report.
    #[arg(long, default_value = "20s", value_parser = duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub access: PrometheusAccess,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The experiment.
    pub name: String,
    /// Prometheus base URL as this machine reaches it; default: the experiment's
    /// (spec.analysis.prometheus.url, often reachable only inside the cluster).
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    /// Where to write it; default: NAME.html; `-` for standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Timeout of each Prometheus query.
    #[arg(long, default_value = "20s", value_parser = duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub access: PrometheusAccess,
}

#[derive(Args, Debug, Clone)]
pub struct GetArgs {
    /// The experiment; without it, one line per experiment in the namespace.
    pub name: Option<String>,
    /// Keep watching: for one experiment, a line per change (phase, weight, each analysis,
    /// the decision) until it has finished; for the namespace, a line per status change.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With `-w NAME`: give up after this long (exit code 1), e.g. `10m`.
    #[arg(long, requires = "watch", requires = "name", value_parser = duration)]
    pub timeout: Option<Duration>,
}

#[derive(Args, Debug, Clone)]
pub struct NameArg {
    /// The experiment.
    pub name: String,
}

#[derive(Args, Debug, Clone)]
pub struct RecommendArgs {
    /// The Deployment to measure.
    pub deployment: String,
    /// Prometheus base URL, e.g. http://prometheus.monitoring:9090.
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: String,
    /// The app container; default: the first container.
    #[arg(long)]
    pub container: Option<String>,
    /// How far back the rates are measured (PromQL range).
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub window: Duration,
    /// Smallest gain of one more thread that is still worth it.
    #[arg(long, default_value = "5%", value_parser = share)]
    pub min_gain: f64,
    /// I/O share above which an async server (Falcon) is advised.
    #[arg(long, default_value = "80%", value_parser = share)]
    pub async_above: f64,
    /// Metric name of your exporter, as in spec.analysis.metrics: `requestsTotal=http_requests_total`,
    /// or its preset: `preset=prometheusExporter`. Repeatable; default names are the reference
    /// images'.
    #[arg(long = "metric", value_name = "FIELD=NAME")]
    pub metrics: Vec<String>,
    /// Timeout of each Prometheus query.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub access: PrometheusAccess,
}

/// How the plugin reaches a Prometheus that wants credentials, TLS or a tenant header. The
/// files are the user's own (the operator takes its credentials from its configuration).
#[derive(Args, Debug, Clone, Default)]
pub struct PrometheusAccess {
    /// File holding a bearer token sent to Prometheus.
    #[arg(long, value_name = "FILE")]
    pub prometheus_token_file: Option<PathBuf>,
    /// CA certificate (PEM) that Prometheus' certificate must chain to.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// Extra request header, e.g. `X-Scope-OrgID: team-a`; repeatable.
    #[arg(long = "prometheus-header", value_name = "NAME: VALUE")]
    pub prometheus_headers: Vec<String>,
}

impl PrometheusAccess {
    /// The provider for `url` with these credentials, TLS and headers.
    pub fn provider(&self, url: &str) -> Result<Provider, String> {
        let mut headers = BTreeMap::new();
        for h in &self.prometheus_headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| format!("--prometheus-header {h:?}: expected NAME: VALUE"))?;
            headers.insert(name.trim().to_string(), value.trim().to_string());
        }
        Ok(Provider {
            url: url.to_string(),
            auth: match &self.prometheus_token_file {
                Some(f) => Auth::BearerTokenFile(f.clone()),
                None => Auth::None,
            },
            tls: Tls {
                ca_file: self.prometheus_ca_file.clone(),
                ..Default::default()
            },
            headers,
            credentials: None,
        })
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitServer {
    #[default]
    Puma,
    Falcon,
}

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// The Deployment to experiment on.
    pub deployment: String,
    /// The candidate's server.
    #[arg(long, value_enum, default_value_t = InitServer::Puma)]
    pub server: InitServer,
    /// Candidate threads per Puma worker (puma only).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=1024))]
    pub threads: Option<i32>,
    /// Candidate workers; default for puma: the target's current workers. Required for falcon.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=1024), required_if_eq("server", "falcon"))]
    pub workers: Option<i32>,
    /// Prometheus base URL; when given, only checks whose metrics have data are enabled.
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    /// The app container; default: the first container.
    #[arg(long)]
    pub container: Option<String>,
    /// The experiment's name; default: DEPLOYMENT-<candidate>, e.g. storefront-puma-2x4.
    #[arg(long)]
    pub name: Option<String>,
    /// The app's exporter (spec.analysis.metrics.preset): yabeda, prometheusExporter or
    /// referenceApp; default: the reference images' names.
    #[arg(long, value_parser = preset)]
    pub preset: Option<MetricPreset>,
    #[command(flatten)]
    pub access: PrometheusAccess,
}

/// A preset by its name in the CRD.
fn preset(s: &str) -> Result<MetricPreset, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|e| e.to_string())
}
