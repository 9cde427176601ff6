use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use concurrency_operator::cli::{
    self, Cli, Command, DrainArgs, RbacCheckArgs, RecommendArgs, RunArgs,
};
use concurrency_operator::controller::{self, RunConfig, Settings};
use concurrency_operator::leader::{LeaderConfig, LeaderElection};
use concurrency_operator::notify::deliver::{
    Notifier, NotifierConfig, RetryPolicy, SlackSink, WebhookSink,
};
use concurrency_operator::telemetry::{
    cancel_on_signal, init_logging, install_crypto_provider, CancellationToken, Metrics, Readiness,
    TelemetryServer,
};
use concurrency_operator::{api, drain, kubectl, notify};

/// How long a stopping operator waits for queued notifications (the controllers get 10 s, the
/// pod 30 s in all).
const NOTIFY_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd => crd(),
        Command::Recommend(args) => recommend(&args),
        Command::Run(args) => run(*args).await,
        Command::Drain(args) => drain(args).await,
        Command::RbacCheck(args) => rbac_check(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn crd() -> anyhow::Result<()> {
    print!("{}", api::crd_yaml().context("rendering the CRD")?);
    Ok(())
}

fn rbac_check(args: &RbacCheckArgs) -> anyhow::Result<()> {
    let rendered = std::fs::read_to_string(&args.rendered)
        .with_context(|| format!("reading {}", args.rendered.display()))?;
    let diff = concurrency_operator::rbac::compare_chart(&rendered, &args.fullname)
        .map_err(anyhow::Error::msg)?;
    for line in &diff {
        println!("{line}");
    }
    anyhow::ensure!(
        diff.is_empty(),
        "{} difference(s) between the chart's RBAC and src/rbac",
        diff.len()
    );
    Ok(())
}

fn recommend(args: &RecommendArgs) -> anyhow::Result<()> {
    print!("{}", kubectl::capacity::offline_report(args));
    Ok(())
}

/// Progress goes to stdout line by line: it is what `kubectl logs` of the uninstall hook shows.
async fn drain(args: DrainArgs) -> anyhow::Result<()> {
    install_crypto_provider();
    let client = kube::Client::try_default()
        .await
        .context("connecting to Kubernetes")?;
    let config = drain::DrainConfig {
        namespaces: cli::namespaces(&args.namespaces),
        timeout: args.timeout,
        poll: std::time::Duration::from_secs(2),
    };
    let deleted = drain::drain(client, &config, |line| println!("drain: {line}"))
        .await
        .context("draining experiments")?;
    println!("drain: done, {deleted} experiment(s) deleted, every baseline in place");
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    install_crypto_provider();
    init_logging(args.log_format, "info").context("setting up logging")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to Kubernetes")?;
    let metrics = Metrics::new();
    let readiness = Readiness::new();
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone()).context("installing signal handlers")?;
    let server = TelemetryServer::bind(
        args.metrics_addr,
        metrics.clone(),
        readiness.clone(),
        shutdown.clone(),
    )
    .await?;

    let election = if args.leader_election {
        let namespace = args
            .lease_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".into());
        let config = LeaderConfig::new(namespace, args.lease_name.clone());
        Some(
            LeaderElection::start(client.clone(), config, metrics.clone(), shutdown.clone())
                .await?,
        )
    } else {
        metrics.set_leader(true);
        None
    };

    let prometheus = prometheus_config(args.prometheus_config.as_deref())?;
    let notifier = Notifier::start(notifier_config(&args.notify)?, metrics.clone());
    let namespaces = cli::namespaces(&args.namespaces);
    let config = RunConfig {
        namespaces: namespaces.clone(),
        settings: Settings {
            prometheus_timeout: args.prometheus_timeout,
            prometheus,
            preflight: args.preflight,
            allow_candidate_overrides: args.allow_candidate_overrides,
            ..Settings::default()
        },
        metrics,
        readiness,
        leader: election.as_ref().map(LeaderElection::subscribe),
        shutdown: shutdown.clone(),
        notifier,
    };
    tracing::info!(
        ?namespaces,
        leader_election = args.leader_election,
        "starting"
    );
    tracing::info!(enabled = config.notifier.is_enabled(), "notifications");
    let notifier = config.notifier.clone();
    let result = controller::run(client, config).await;
    // Whatever ended the controllers, stop the rest and release the lease.
    shutdown.cancel();
    // Decisions made just before the shutdown are still told (within the pod's grace period).
    if !notifier.flush(NOTIFY_FLUSH).await {
        tracing::warn!(timeout = ?NOTIFY_FLUSH, "notifications still queued at shutdown are not sent");
    }
    if let Some(election) = election {
        election.stopped().await;
    }
    server.wait().await;
    result.context("controller")
}

/// The Prometheus providers file, checked whole at start-up: a mistake there stops the
/// operator with the field named, rather than making every experiment Invalid.
fn prometheus_config(
    path: Option<&std::path::Path>,
) -> anyhow::Result<concurrency_operator::prometheus::ProvidersConfig> {
    let Some(path) = path else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --prometheus-config {}", path.display()))?;
    let config = concurrency_operator::prometheus::ProvidersConfig::parse(&text)
        .with_context(|| format!("--prometheus-config {}", path.display()))?;
    tracing::info!(
        default = config.default.is_some(),
        credentials = ?config.credentials.keys().collect::<Vec<_>>(),
        allowed_urls = config.allowed_urls.len(),
        "Prometheus providers"
    );
    Ok(config)
}

/// The notifier's sinks from the command line. Only the names in `--notify-events` are checked
/// here: the files are read at each delivery (a Secret not mounted yet is a failed delivery,
/// counted and logged, never a crash loop of the operator).
fn notifier_config(args: &cli::NotifyArgs) -> anyhow::Result<NotifierConfig> {
    let filter = notify::Filter::parse(&args.notify_events).context("--notify-events")?;
    Ok(NotifierConfig {
        webhook: args
            .notify_webhook_url_file
            .clone()
            .map(|url_file| WebhookSink {
                url_file,
                signing_key_file: args.notify_webhook_signing_key_file.clone(),
            }),
        slack: args
            .notify_slack_url_file
            .clone()
            .map(|url_file| SlackSink {
                url_file,
                options: notify::SlackOptions {
                    username: args.notify_slack_username.clone().filter(|s| !s.is_empty()),
                    channel: args.notify_slack_channel.clone().filter(|s| !s.is_empty()),
                },
            }),
        filter,
        cluster: args.notify_cluster.clone().filter(|s| !s.is_empty()),
        retry: RetryPolicy {
            attempts: args.notify_attempts,
            timeout: args.notify_timeout,
            ..RetryPolicy::default()
        },
        queue: 256,
    })
}
