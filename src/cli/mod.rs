//! Command line: every flag of `run` can also be set through an environment variable, so the
//! Helm chart configures the operator with env alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::api::{parse_duration, parse_percent};
pub use crate::telemetry::LogFormat;

#[derive(Parser, Debug)]
#[command(name = "concurrency-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Print the ConcurrencyExperiment CRD as YAML.
    Crd,
    /// Print the Amdahl thread-count table for a measured I/O share.
    Recommend(RecommendArgs),
    /// Delete every experiment in the watched namespaces and wait until they are gone (the
    /// running operator restores each baseline first). Run before uninstalling.
    Drain(DrainArgs),
    /// Compare a `helm template` output's Roles with the permissions the code declares
    /// (src/rbac): prints each difference and fails on any.
    RbacCheck(RbacCheckArgs),
}

#[derive(Args, Debug, Clone)]
pub struct RbacCheckArgs {
    /// The rendered chart (`helm template … > FILE`).
    pub rendered: std::path::PathBuf,
    /// The release's full name: the operator's Role or ClusterRole is named so, its leader
    /// election's and the uninstall hook's `<name>-leader-election` and `<name>-drain`.
    #[arg(long)]
    pub fullname: String,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Namespaces to watch, comma separated; empty watches all namespaces.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_NAMESPACES",
        value_delimiter = ',',
        num_args = 0..
    )]
    pub namespaces: Vec<String>,
    /// Address of the /metrics, /healthz and /readyz server.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_addr: SocketAddr,
    /// `text` for a terminal, `json` for a log pipeline (RUST_LOG sets the filter).
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,
    /// Reconcile only while holding the Lease (needed with more than one replica).
    #[arg(long, env = "CONCURRENCY_OPERATOR_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Name of the coordination.k8s.io Lease used for leader election.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_LEASE_NAME",
        default_value = "concurrency-operator"
    )]
    pub lease_name: String,
    /// Namespace of the Lease; default: the pod's namespace (POD_NAMESPACE) or `default`.
    #[arg(long, env = "CONCURRENCY_OPERATOR_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Timeout of each Prometheus query.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_PROMETHEUS_TIMEOUT",
        default_value = "10s",
        value_parser = duration
    )]
    pub prometheus_timeout: Duration,
    /// The Prometheus providers file (docs/operations.md): a default provider for experiments
    /// that omit `analysis.prometheus.url`, named credentials sets, allowed URLs. Unset: every
    /// experiment names its own URL and no credentials exist.
    #[arg(long, env = "CONCURRENCY_OPERATOR_PROMETHEUS_CONFIG")]
    pub prometheus_config: Option<PathBuf>,
    /// Look up every check's series in Prometheus before a new experiment creates anything
    /// (a series that never existed makes it Invalid). `false` starts experiments without it.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_PREFLIGHT",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub preflight: bool,
    /// Let candidates set command, args and env (they run with the target's ServiceAccount).
    /// `false` makes an experiment that sets them Invalid, naming the field.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_ALLOW_CANDIDATE_OVERRIDES",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub allow_candidate_overrides: bool,
    #[command(flatten)]
    pub notify: NotifyArgs,
}

/// Notifications (docs/notifications.md). URLs and the signing key are files — the chart mounts
/// them from a Secret — read again for every delivery, so a rotated Secret needs no restart.
#[derive(Args, Debug, Clone, Default)]
pub struct NotifyArgs {
    /// File holding the generic webhook's URL; unset: no generic webhook.
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_WEBHOOK_URL_FILE")]
    pub notify_webhook_url_file: Option<PathBuf>,
    /// File holding the HMAC-SHA256 key the webhook body is signed with
    /// (`X-Concurrency-Signature: sha256=…`); unset: unsigned.
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_WEBHOOK_SIGNING_KEY_FILE")]
    pub notify_webhook_signing_key_file: Option<PathBuf>,
    /// File holding a Slack-compatible incoming-webhook URL; unset: no Slack message.
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_SLACK_URL_FILE")]
    pub notify_slack_url_file: Option<PathBuf>,
    /// Slack `username` override (Mattermost and legacy Slack webhooks honour it).
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_SLACK_USERNAME")]
    pub notify_slack_username: Option<String>,
    /// Slack `channel` override (Mattermost and legacy Slack webhooks honour it).
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_SLACK_CHANNEL")]
    pub notify_slack_channel: Option<String>,
    /// What to tell, comma separated: Started, StageAdvanced, AwaitingApproval, Paused,
    /// RolledBack, Promoted, Invalid. Empty: all of them.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_NOTIFY_EVENTS",
        value_delimiter = ',',
        num_args = 0..
    )]
    pub notify_events: Vec<String>,
    /// Cluster name put in every notification.
    #[arg(long, env = "CONCURRENCY_OPERATOR_NOTIFY_CLUSTER")]
    pub notify_cluster: Option<String>,
    /// Attempts per notification and sink, the first included (backoff 1 s, doubling).
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_NOTIFY_ATTEMPTS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u32).range(1..=20)
    )]
    pub notify_attempts: u32,
    /// Timeout of one delivery attempt.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_NOTIFY_TIMEOUT",
        default_value = "5s",
        value_parser = duration
    )]
    pub notify_timeout: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct DrainArgs {
    /// Namespaces to drain, comma separated; empty drains all namespaces.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_NAMESPACES",
        value_delimiter = ',',
        num_args = 0..
    )]
    pub namespaces: Vec<String>,
    /// How long to wait for the experiments to be gone.
    #[arg(
        long,
        env = "CONCURRENCY_OPERATOR_DRAIN_TIMEOUT",
        default_value = "5m",
        value_parser = duration
    )]
    pub timeout: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct RecommendArgs {
    /// Measured I/O share of request time, 0..1 (e.g. 0.52) or a percentage (52%); without it,
    /// io / (cpu + io) of the two times below.
    #[arg(long, value_parser = share, required_unless_present_all = ["cpu_per_request", "io_per_request"])]
    pub io_ratio: Option<f64>,
    /// CPU time (holding the GVL) per request, e.g. `2ms`: with `--io-per-request` the
    /// capacity per thread count is printed too (docs/capacity.md).
    #[arg(long, value_parser = duration, requires = "io_per_request")]
    pub cpu_per_request: Option<Duration>,
    /// I/O wait per request, e.g. `60ms`.
    #[arg(long, value_parser = duration, requires = "cpu_per_request")]
    pub io_per_request: Option<Duration>,
    /// Workers per pod (`WEB_CONCURRENCY`) for the capacity table.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=256))]
    pub workers: i32,
    /// Threads per worker now, marked in the capacity table.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=256))]
    pub threads: Option<i32>,
    /// The container's CPU limit in cores (`1`, `500m`): caps a pod's capacity.
    #[arg(long, value_parser = cpu_cores)]
    pub cpu_limit: Option<f64>,
    /// The busiest pod's requests per second now: the headroom column.
    #[arg(long, value_parser = rate)]
    pub rate: Option<f64>,
    /// Smallest gain of one more thread that is still worth it.
    #[arg(long, default_value = "5%", value_parser = share)]
    pub min_gain: f64,
    /// I/O share above which an async server (Falcon) is advised.
    #[arg(long, default_value = "80%", value_parser = share)]
    pub async_above: f64,
}

/// The namespaces to watch or drain, without empty entries: the chart passes
/// `CONCURRENCY_OPERATOR_NAMESPACES=""` for "all namespaces", which clap reads as one empty
/// namespace (an API path `namespaces//…` that matches nothing).
pub fn namespaces(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}

pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    parse_duration("duration", value).map_err(|e| e.to_string())
}

/// `1`, `1.5`, `500m` → cores; anything but a positive quantity is refused.
pub(crate) fn cpu_cores(value: &str) -> Result<f64, String> {
    crate::analysis::cpu_cores(value)
        .ok_or_else(|| format!("{value:?} is not a CPU quantity like 1, 1.5 or 500m"))
}

/// Requests per second, a finite number ≥ 0.
pub(crate) fn rate(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{value:?} is not a request rate like 30 or 12.5")),
    }
}

/// `0.52` or `52%` → 0.52; rejects values outside 0..=1.
pub(crate) fn share(value: &str) -> Result<f64, String> {
    let v = if value.trim().ends_with('%') {
        parse_percent("share", value).map_err(|e| e.to_string())?
    } else {
        value
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{value:?} is not a number like 0.52 or 52%"))?
    };
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{value:?} must be between 0 and 1 (or 0% and 100%)"
        ))
    }
}

#[cfg(test)]
mod tests;
