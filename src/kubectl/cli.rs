//! The plugin's command line. kubectl runs `kubectl-concurrency ARGS` for
//! `kubectl concurrency ARGS`, so the usage is written as the latter.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli::{duration, share};

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
}

#[derive(Args, Debug, Clone)]
pub struct GetArgs {
    /// The experiment; without it, one line per experiment in the namespace.
    pub name: Option<String>,
    /// Keep watching and print again whenever the status changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
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
    #[arg(long, default_value = "95%", value_parser = share)]
    pub async_above: f64,
    /// Metric name of your exporter, as in spec.analysis.metrics: `requestsTotal=http_requests_total`.
    /// Repeatable; default names are yabeda-rails' and the reference images'.
    #[arg(long = "metric", value_name = "FIELD=NAME")]
    pub metrics: Vec<String>,
    /// Timeout of each Prometheus query.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub timeout: Duration,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-concurrency").chain(args.iter().copied()))
    }

    #[test]
    fn get_takes_an_optional_name_watch_and_namespace_anywhere() {
        let cli = parse(&["get", "storefront-threads", "-w", "-n", "shop"]).unwrap();
        assert_eq!(cli.namespace.as_deref(), Some("shop"));
        let Command::Get(g) = cli.command else {
            panic!("not get")
        };
        assert_eq!(g.name.as_deref(), Some("storefront-threads"));
        assert!(g.watch);
        let cli = parse(&["-n", "shop", "get"]).unwrap();
        let Command::Get(g) = cli.command else {
            panic!("not get")
        };
        assert_eq!((g.name, g.watch), (None, false));
        assert_eq!(cli.namespace.as_deref(), Some("shop"));
        let cli = parse(&[
            "abort",
            "x",
            "--as",
            "system:serviceaccount:shop:viewer",
            "--as-group",
            "a",
            "--as-group",
            "b",
        ])
        .unwrap();
        assert_eq!(
            cli.as_user.as_deref(),
            Some("system:serviceaccount:shop:viewer")
        );
        assert_eq!(cli.as_groups, ["a", "b"]);
    }

    #[test]
    fn control_commands_need_a_name() {
        for c in ["approve", "abort", "retry", "pause", "resume", "history"] {
            assert!(parse(&[c]).is_err(), "{c} without a name");
            assert!(parse(&[c, "x"]).is_ok(), "{c} x");
        }
    }

    #[test]
    fn recommend_needs_prometheus_and_parses_its_flags() {
        // Isolated from a PROMETHEUS_URL in the test's environment by giving it explicitly.
        let cli = parse(&[
            "recommend",
            "storefront",
            "--prometheus",
            "http://prom:9090",
            "--window",
            "10m",
            "--min-gain",
            "10%",
            "--metric",
            "requestsTotal=http_requests_total",
        ])
        .unwrap();
        let Command::Recommend(r) = cli.command else {
            panic!("not recommend")
        };
        assert_eq!(r.deployment, "storefront");
        assert_eq!(r.window, Duration::from_secs(600));
        assert!((r.min_gain - 0.10).abs() < 1e-12);
        assert!((r.async_above - 0.95).abs() < 1e-12);
        assert_eq!(r.metrics, ["requestsTotal=http_requests_total"]);
        assert!(parse(&[
            "recommend",
            "x",
            "--prometheus",
            "http://p",
            "--window",
            "5"
        ])
        .is_err());
    }

    #[test]
    fn init_wants_workers_for_falcon_and_positive_counts() {
        let cli = parse(&["init", "storefront", "--threads", "4"]).unwrap();
        let Command::Init(i) = cli.command else {
            panic!("not init")
        };
        assert_eq!(
            (i.server, i.threads, i.workers),
            (InitServer::Puma, Some(4), None)
        );
        assert!(parse(&["init", "storefront", "--server", "falcon"]).is_err());
        let cli = parse(&["init", "storefront", "--server", "falcon", "--workers", "2"]).unwrap();
        let Command::Init(i) = cli.command else {
            panic!("not init")
        };
        assert_eq!((i.server, i.workers), (InitServer::Falcon, Some(2)));
        assert!(parse(&["init", "storefront", "--threads", "0"]).is_err());
        assert!(parse(&["init", "storefront", "--server", "unicorn"]).is_err());
    }
}
