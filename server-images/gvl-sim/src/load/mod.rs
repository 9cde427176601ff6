//! `gvl-sim load`: an open-model (constant arrival rate) or closed-model HTTP load generator
//! with hard bounds and a loopback-only target guard.

pub mod client;
pub mod control;
pub mod engine;
pub mod guard;
pub mod report;

use engine::{Model, Plan};
use std::net::SocketAddr;
use std::time::Duration;

pub const MAX_DURATION: Duration = Duration::from_secs(600);
pub const MAX_CONNECTIONS: usize = 5000;
pub const MAX_RATE: f64 = 100_000.0;
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Target, with the request path and query: http://127.0.0.1:3000/?io_ms=500
    #[arg(long)]
    pub url: String,
    /// Open model: requests per second, sent on schedule (latency from the due time).
    #[arg(long, required_unless_present = "closed", conflicts_with = "closed")]
    pub rate: Option<f64>,
    /// Closed model: each connection sends back-to-back (wrk style), no rate.
    #[arg(long)]
    pub closed: bool,
    /// How long to send, e.g. 30s, 2m, 500ms (at most 10m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Concurrent keep-alive connections (at most 5000).
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// Close a connection once it is this old — after its answer, before the next request —
    /// and open a new one, e.g. 10s. A Kubernetes Service (kube-proxy) picks the backend pod
    /// per connection, so without this, pods added during the run (a candidate) get no traffic
    /// from connections opened before them. Each connection's limit is drawn from
    /// 0.9–1.0 × this, so reconnects spread out. Default: off (connections kept for the run).
    #[arg(long, value_parser = parse_duration)]
    pub max_connection_age: Option<Duration>,
    /// Per-request timeout (at most 60s); also how long the open model drains after the end.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Also allow targets in this private range (a test cluster you created), e.g.
    /// 10.96.0.0/12. Repeatable.
    #[arg(long = "allow-cidr")]
    pub allow_cidr: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Do not send `X-Request-Start: t=<unix ms>`. By default each request carries it,
    /// stamped as the request is written — what a load balancer adds — so the server can
    /// report request queue time (the wait for a free thread).
    #[arg(long)]
    pub no_request_start: bool,
    /// Send what AWS ALB sends instead of `X-Request-Start`: only `X-Amzn-Trace-Id`, whose
    /// root id has the arrival second (one-second resolution, the case the operator detects).
    #[arg(long, conflicts_with = "no_request_start")]
    pub alb_trace_id: bool,
    /// Serve `POST /stop` on this port (all addresses): it ends the run early, answers still
    /// due are waited for and the summary is printed as at the end (`stopped_early: true`).
    #[arg(long)]
    pub control_port: Option<u16>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadError {
    #[error("--{0} {1}")]
    Bound(&'static str, String),
    #[error(transparent)]
    Url(#[from] client::UrlError),
    #[error(transparent)]
    Guard(#[from] guard::GuardError),
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, String),
    #[error("--control-port {0}: {1}")]
    Control(u16, String),
}

impl LoadError {
    pub fn category(&self) -> &'static str {
        match self {
            LoadError::Bound(..) => "load_bounds",
            LoadError::Url(_) => "load_url",
            LoadError::Guard(g) => g.category(),
            LoadError::Resolve(..) => "load_resolve",
            LoadError::Control(..) => "load_control",
        }
    }
}

/// `30s`, `2m`, `500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 2m, 500ms)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?} must be a non-negative duration"));
    }
    // `from_secs_f64` would panic on values like 1e30.
    Duration::try_from_secs_f64(v * scale).map_err(|_| format!("{s:?} is too long"))
}

/// Checks the bounds and builds the plan.
pub fn plan(args: &LoadArgs) -> Result<Plan, LoadError> {
    if args.duration.is_zero() || args.duration > MAX_DURATION {
        return Err(LoadError::Bound(
            "duration",
            "must be > 0 and at most 10m".into(),
        ));
    }
    if args.connections == 0 || args.connections > MAX_CONNECTIONS {
        return Err(LoadError::Bound(
            "connections",
            format!("must be 1..={MAX_CONNECTIONS}"),
        ));
    }
    if args.timeout < Duration::from_millis(100) || args.timeout > MAX_TIMEOUT {
        return Err(LoadError::Bound("timeout", "must be 100ms..=60s".into()));
    }
    if args.max_connection_age.is_some_and(|age| age.is_zero()) {
        return Err(LoadError::Bound(
            "max-connection-age",
            "must be > 0 (leave it out to keep connections open)".into(),
        ));
    }
    let model = match (args.rate, args.closed) {
        (_, true) => Model::Closed,
        (Some(rate), false) if rate > 0.0 && rate <= MAX_RATE => Model::Open { rate },
        _ => {
            return Err(LoadError::Bound(
                "rate",
                format!("must be > 0 and at most {MAX_RATE} (or use --closed)"),
            ))
        }
    };
    Ok(Plan {
        model,
        duration: args.duration,
        connections: args.connections,
        timeout: args.timeout,
        max_connection_age: args.max_connection_age,
    })
}

/// Resolves the target and applies the guard to every address it resolves to.
pub async fn resolve_checked(
    target: &client::Target,
    allow: &[String],
) -> Result<SocketAddr, LoadError> {
    let allowed = allow
        .iter()
        .map(|c| guard::parse_allow_cidr(c))
        .collect::<Result<Vec<_>, _>>()?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| LoadError::Resolve(target.host.clone(), e.to_string()))?
        .collect();
    let ips: Vec<_> = addrs.iter().map(|a| a.ip()).collect();
    guard::check_targets(&ips, &allowed)?;
    addrs
        .first()
        .copied()
        .ok_or_else(|| LoadError::Resolve(target.host.clone(), "no addresses".into()))
}

/// Runs the load and returns the summary.
pub async fn run(args: &LoadArgs) -> Result<report::Summary, LoadError> {
    let plan = plan(args)?;
    let target = client::parse_url(&args.url)?;
    let addr = resolve_checked(&target, &args.allow_cidr).await?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    if let Some(port) = args.control_port {
        let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
            .await
            .map_err(|e| LoadError::Control(port, e.to_string()))?;
        tokio::spawn(control::serve(listener, stop_tx.clone()));
    }
    let results = engine::run_until(
        &plan,
        |_| {
            client::HttpSender::new(addr, &target, plan.max_connection_age).with_stamp(
                match (args.no_request_start, args.alb_trace_id) {
                    (true, _) => client::Stamp::None,
                    (false, true) => client::Stamp::AlbTraceId,
                    (false, false) => client::Stamp::Millis,
                },
            )
        },
        stop.clone(),
    )
    .await;
    let mut summary = report::summarize(&args.url, &plan, &results);
    summary.stopped_early = *stop.borrow();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn args(extra: &[&str]) -> LoadArgs {
        let mut argv = vec!["x", "--url", "http://127.0.0.1:1/"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().load
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1e30s").is_err());
    }

    #[test]
    fn bounds_are_enforced() {
        assert!(plan(&args(&["--rate", "10"])).is_ok());
        assert!(plan(&args(&["--closed", "--connections", "1000"])).is_ok());
        let err = plan(&args(&["--rate", "10", "--duration", "11m"])).unwrap_err();
        assert_eq!(err.category(), "load_bounds");
        assert!(err.to_string().contains("--duration"));
        assert!(plan(&args(&["--rate", "10", "--connections", "5001"])).is_err());
        assert!(plan(&args(&["--rate", "10", "--connections", "0"])).is_err());
        assert!(plan(&args(&["--rate", "0"])).is_err());
        assert!(plan(&args(&["--rate", "1000000"])).is_err());
        assert!(plan(&args(&["--rate", "10", "--timeout", "2m"])).is_err());
    }

    #[test]
    fn max_connection_age_is_off_by_default_and_positive_when_set() {
        assert_eq!(
            plan(&args(&["--rate", "10"])).unwrap().max_connection_age,
            None
        );
        let p = plan(&args(&["--rate", "10", "--max-connection-age", "200ms"])).unwrap();
        assert_eq!(p.max_connection_age, Some(Duration::from_millis(200)));
        let err = plan(&args(&["--rate", "10", "--max-connection-age", "0s"])).unwrap_err();
        assert_eq!(err.category(), "load_bounds");
        assert!(err.to_string().contains("--max-connection-age"), "{err}");
        let argv = ["x", "--url", "http://127.0.0.1:1/", "--rate", "1"];
        let bad = [&argv[..], &["--max-connection-age", "soon"]].concat();
        assert!(Cli::try_parse_from(bad).is_err());
    }

    #[test]
    fn request_start_is_on_unless_turned_off() {
        assert!(!args(&["--rate", "10"]).no_request_start);
        assert!(args(&["--rate", "10", "--no-request-start"]).no_request_start);
        assert!(args(&["--rate", "10", "--alb-trace-id"]).alb_trace_id);
    }

    #[test]
    fn rate_or_closed_is_required_not_both() {
        let argv = ["x", "--url", "http://127.0.0.1:1/"];
        assert!(Cli::try_parse_from(argv).is_err());
        let both = [
            "x",
            "--url",
            "http://127.0.0.1:1/",
            "--rate",
            "5",
            "--closed",
        ];
        assert!(Cli::try_parse_from(both).is_err());
    }

    #[tokio::test]
    async fn the_guard_runs_before_any_traffic() {
        let outside = args(&["--rate", "10"]);
        let outside = LoadArgs {
            url: "http://192.0.2.1:80/".into(),
            ..outside
        };
        let err = run(&outside).await.unwrap_err();
        assert_eq!(err.category(), "target_refused");
        let wide = LoadArgs {
            allow_cidr: vec!["0.0.0.0/0".into()],
            ..outside
        };
        assert_eq!(
            run(&wide).await.unwrap_err().category(),
            "allow_cidr_invalid"
        );
    }
}
