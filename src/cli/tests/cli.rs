use crate::cli::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("concurrency-operator").chain(args.iter().copied()))
}

#[test]
fn run_has_working_defaults() {
    let Command::Run(run) = parse(&["run"]).unwrap().command else {
        panic!("not run")
    };
    assert!(run.namespaces.is_empty());
    assert_eq!(run.metrics_addr.to_string(), "0.0.0.0:8080");
    assert_eq!(run.log_format, LogFormat::Text);
    assert!(!run.leader_election);
    assert_eq!(run.lease_name, "concurrency-operator");
    assert_eq!(run.prometheus_timeout, Duration::from_secs(10));
}

#[test]
fn run_flags_parse() {
    let cli = parse(&[
        "run",
        "--namespaces",
        "shop,billing",
        "--log-format",
        "json",
        "--leader-election",
        "--prometheus-timeout",
        "1m30s",
    ])
    .unwrap();
    let Command::Run(run) = cli.command else {
        panic!("not run")
    };
    assert_eq!(run.namespaces, ["shop", "billing"]);
    assert_eq!(run.log_format, LogFormat::Json);
    assert!(run.leader_election);
    assert_eq!(run.prometheus_timeout, Duration::from_secs(90));
    assert!(parse(&["run", "--prometheus-timeout", "10"]).is_err());
}

#[test]
fn an_empty_namespace_list_means_all_namespaces() {
    let Command::Drain(d) = parse(&["drain", "--namespaces", ""]).unwrap().command else {
        panic!("not drain")
    };
    assert_eq!(d.namespaces, [""]);
    assert!(namespaces(&d.namespaces).is_empty());
    let Command::Run(r) = parse(&["run", "--namespaces", "shop, ,billing,"])
        .unwrap()
        .command
    else {
        panic!("not run")
    };
    assert_eq!(namespaces(&r.namespaces), ["shop", "billing"]);
}

#[test]
fn drain_defaults_and_flags() {
    let Command::Drain(d) = parse(&["drain"]).unwrap().command else {
        panic!("not drain")
    };
    assert!(d.namespaces.is_empty());
    assert_eq!(d.timeout, Duration::from_secs(300));
    let Command::Drain(d) = parse(&["drain", "--namespaces", "shop,billing", "--timeout", "90s"])
        .unwrap()
        .command
    else {
        panic!("not drain")
    };
    assert_eq!(d.namespaces, ["shop", "billing"]);
    assert_eq!(d.timeout, Duration::from_secs(90));
    assert!(parse(&["drain", "--timeout", "soon"]).is_err());
}

#[test]
fn recommend_takes_ratios_and_percentages() {
    let Command::Recommend(r) = parse(&["recommend", "--io-ratio", "52%"]).unwrap().command else {
        panic!("not recommend")
    };
    assert!((r.io_ratio.unwrap() - 0.52).abs() < 1e-12);
    assert!((r.min_gain - 0.05).abs() < 1e-12);
    assert!((r.async_above - 0.80).abs() < 1e-12);
    assert!(parse(&["recommend", "--io-ratio", "1.5"]).is_err());
    assert!(parse(&["recommend", "--io-ratio", "lots"]).is_err());
    assert!(parse(&["recommend"]).is_err());
}

#[test]
fn recommend_takes_the_times_per_request_instead_of_the_ratio() {
    let Command::Recommend(r) = parse(&[
        "recommend",
        "--cpu-per-request",
        "2ms",
        "--io-per-request",
        "60ms",
        "--workers",
        "2",
        "--threads",
        "6",
        "--cpu-limit",
        "500m",
        "--rate",
        "30",
    ])
    .unwrap()
    .command
    else {
        panic!("not recommend")
    };
    assert_eq!(r.io_ratio, None);
    assert_eq!(r.cpu_per_request, Some(std::time::Duration::from_millis(2)));
    assert_eq!((r.workers, r.threads), (2, Some(6)));
    assert_eq!((r.cpu_limit, r.rate), (Some(0.5), Some(30.0)));
    // One time alone is not enough, nor a limit that is not a quantity.
    assert!(parse(&["recommend", "--cpu-per-request", "2ms"]).is_err());
    assert!(parse(&["recommend", "--io-ratio", "50%", "--cpu-limit", "lots"]).is_err());
}

#[test]
fn notifications_are_off_by_default_and_configured_by_files() {
    let Command::Run(run) = parse(&["run"]).unwrap().command else {
        panic!("not run")
    };
    let n = &run.notify;
    assert!(n.notify_webhook_url_file.is_none() && n.notify_slack_url_file.is_none());
    assert!(n.notify_events.is_empty());
    assert_eq!(
        (n.notify_attempts, n.notify_timeout),
        (5, Duration::from_secs(5))
    );
    let Command::Run(run) = parse(&[
        "run",
        "--notify-webhook-url-file",
        "/etc/n/webhook-url",
        "--notify-webhook-signing-key-file",
        "/etc/n/key",
        "--notify-slack-url-file",
        "/etc/n/slack-url",
        "--notify-events",
        "RolledBack,Promoted",
        "--notify-attempts",
        "3",
        "--notify-timeout",
        "2s",
    ])
    .unwrap()
    .command
    else {
        panic!("not run")
    };
    let n = &run.notify;
    assert_eq!(
        n.notify_webhook_url_file.as_deref(),
        Some(std::path::Path::new("/etc/n/webhook-url"))
    );
    assert_eq!(n.notify_events, ["RolledBack", "Promoted"]);
    assert_eq!(
        (n.notify_attempts, n.notify_timeout),
        (3, Duration::from_secs(2))
    );
    assert!(parse(&["run", "--notify-attempts", "0"]).is_err());
}
