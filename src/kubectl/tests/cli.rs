use crate::kubectl::cli::*;
use clap::Parser;
use std::time::Duration;

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
    assert!((r.async_above - 0.80).abs() < 1e-12);
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

#[test]
fn recommend_and_init_take_prometheus_credentials_tls_and_headers() {
    use crate::prometheus::provider::Auth;
    let cli = parse(&[
        "recommend",
        "storefront",
        "--prometheus",
        "https://mimir.example/prometheus",
        "--prometheus-token-file",
        "/home/me/token",
        "--prometheus-ca-file",
        "/home/me/ca.crt",
        "--prometheus-header",
        "X-Scope-OrgID: team-a",
        "--prometheus-header",
        "X-Other:1",
    ])
    .unwrap();
    let Command::Recommend(r) = cli.command else {
        panic!("not recommend")
    };
    let p = r.access.provider(&r.prometheus).unwrap();
    assert_eq!(p.url, "https://mimir.example/prometheus");
    assert_eq!(p.auth, Auth::BearerTokenFile("/home/me/token".into()));
    assert_eq!(p.tls.ca_file, Some("/home/me/ca.crt".into()));
    assert_eq!(p.headers["X-Scope-OrgID"], "team-a");
    assert_eq!(p.headers["X-Other"], "1");
    let cli = parse(&["init", "storefront", "--prometheus-header", "no colon"]).unwrap();
    let Command::Init(i) = cli.command else {
        panic!("not init")
    };
    let e = i.access.provider("http://prom:9090").unwrap_err();
    assert!(e.contains("expected NAME: VALUE"), "{e}");
}
