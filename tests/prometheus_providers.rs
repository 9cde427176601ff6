//! The Prometheus providers against a real Prometheus (Debian package `prometheus`): one
//! started with `--web.config.file` requiring basic auth over TLS (a CA and a server
//! certificate made with the `openssl` CLI), one behind a path prefix
//! (`--web.route-prefix`). The operator's configuration file is resolved as an experiment
//! would, and every failure must say why without showing a secret.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use concurrency_operator::api::PrometheusSource;
use concurrency_operator::prometheus::{
    PrometheusClient, PrometheusError, Provider, ProvidersConfig,
};
use jiff::Timestamp;

const PASSWORD: &str = "correct horse battery staple";
/// bcrypt of `PASSWORD` at cost 4 (cheap to check), made with Python's `crypt` module.
const PASSWORD_HASH: &str = "$2b$04$8EOKkLNFLB3MlBMOxV/9FOKzi3Eoj6qqAMu.IyvqHbVKMhizNVWIm";
/// The name in the server certificate; the URL says 127.0.0.1.
const SERVER_NAME: &str = "prometheus.test";
const QUERY: &str = "vector(42)";

struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn prometheus_binary() -> PathBuf {
    let bin = std::env::var("PROMETHEUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/bin/prometheus"));
    assert!(
        bin.is_file(),
        "the prometheus binary is missing at {}: install it with `scripts/install-deps` \
         (Debian package `prometheus`) or point PROMETHEUS_BIN at one",
        bin.display()
    );
    bin
}

fn start(dir: &Path, name: &str, args: &[String]) -> Prometheus {
    let data = dir.join(format!("{name}-data"));
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.join(format!("{name}.yml"));
    std::fs::write(&config, "global: {scrape_interval: 1m}\n").unwrap();
    let port = free_port();
    let child = Command::new(prometheus_binary())
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .args(args.iter().map(|a| a.replace("{port}", &port.to_string())))
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join(format!("{name}.log"))).unwrap(),
        ))
        .spawn()
        .expect("starting prometheus");
    Prometheus { child, port }
}

/// A CA, and a server certificate for `SERVER_NAME` only, signed by it (`scripts/test-certs`).
fn certificates(dir: &Path) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/test-certs");
    let out = Command::new(script)
        .arg(dir)
        .arg(SERVER_NAME)
        .output()
        .expect("scripts/test-certs (needs the openssl CLI, Debian package openssl)");
    assert!(
        out.status.success(),
        "scripts/test-certs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asks until Prometheus answers (it takes a moment to open its storage and port).
async fn ready(client: &PrometheusClient) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.query_value(QUERY, Timestamp::now()).await {
            Ok(v) => return assert_eq!(v, Some(42.0)),
            Err(e) if Instant::now() > deadline => panic!("Prometheus never answered: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn ask(provider: &Provider) -> Result<Option<f64>, PrometheusError> {
    let client = PrometheusClient::for_provider(provider, Duration::from_secs(5))?;
    client.query_value(QUERY, Timestamp::now()).await
}

fn source(yaml: &str) -> PrometheusSource {
    serde_yaml::from_str(yaml).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_over_tls_and_a_path_prefix_against_a_real_prometheus() {
    let dir = TempDir(std::env::temp_dir().join(format!(
        "cexp-prom-providers-{}-{}",
        std::process::id(),
        Timestamp::now().as_nanosecond()
    )));
    let d = dir.0.as_path();
    std::fs::create_dir_all(d).unwrap();
    certificates(d);
    std::fs::write(
        d.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: {0}/server.crt\n  key_file: {0}/server.key\n\
             basic_auth_users:\n  alice: {PASSWORD_HASH}\n",
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("password"), format!("{PASSWORD}\n")).unwrap();
    std::fs::write(d.join("wrong-password"), "hunter2\n").unwrap();

    let secured = start(
        d,
        "secured",
        &[format!("--web.config.file={}", d.join("web.yml").display())],
    );
    let prefixed = start(
        d,
        "prefixed",
        &[
            "--web.route-prefix=/prom".into(),
            "--web.external-url=http://127.0.0.1:{port}/prom".into(),
        ],
    );
    let https = format!("https://127.0.0.1:{}", secured.port);
    let prefix = format!("http://127.0.0.1:{}/prom", prefixed.port);

    // The platform team's file: a default at the path prefix, and team-a's basic auth and CA
    // for the TLS Prometheus, for namespace shop only.
    let config = ProvidersConfig::parse(&format!(
        r#"
default:
  url: {prefix}
credentials:
  team-a:
    url: {https}
    basicAuth: {{username: alice, passwordFile: {pw}}}
    tls: {{caFile: {ca}, serverName: {SERVER_NAME}}}
    namespaces: [shop]
  wrong:
    url: {https}
    basicAuth: {{username: alice, passwordFile: {wrong}}}
    tls: {{caFile: {ca}, serverName: {SERVER_NAME}}}
"#,
        pw = d.join("password").display(),
        wrong = d.join("wrong-password").display(),
        ca = d.join("ca.crt").display(),
    ))
    .unwrap();
    let team_a = config
        .resolve(&source("credentials: team-a"), "shop")
        .unwrap();
    ready(&PrometheusClient::for_provider(&team_a, Duration::from_secs(5)).unwrap()).await;

    // The default: an experiment without analysis.prometheus reaches the prefixed Prometheus.
    let default = config.resolve(&source("{}"), "shop").unwrap();
    ready(&PrometheusClient::for_provider(&default, Duration::from_secs(5)).unwrap()).await;
    // Without the prefix there is no API: an error, not a number.
    let e = ask(&Provider::from_url(&format!(
        "http://127.0.0.1:{}",
        prefixed.port
    )))
    .await
    .unwrap_err();
    assert_eq!(e.category(), "PrometheusError", "{e}");
    assert!(e.to_string().contains("HTTP 404"), "{e}");

    // No credentials: refused by Prometheus, and said so.
    let bare = Provider {
        credentials: None,
        auth: Default::default(),
        ..team_a.clone()
    };
    let e = ask(&bare).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusUnauthorized", "{e}");
    assert!(e.to_string().contains("HTTP 401"), "{e}");
    // A wrong password, from the file or in the URL: refused, and never shown.
    let wrong = config
        .resolve(&source("credentials: wrong"), "shop")
        .unwrap();
    let e = ask(&wrong).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusUnauthorized", "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    let in_url = Provider {
        url: format!("https://alice:hunter2@127.0.0.1:{}", secured.port),
        auth: Default::default(),
        ..team_a.clone()
    };
    let e = ask(&in_url).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusUnauthorized", "{e}");
    // The right password in the URL works too (legacy URLs keep working).
    let encoded = PASSWORD.replace(' ', "%20");
    let right_in_url = Provider {
        url: format!("https://alice:{encoded}@127.0.0.1:{}", secured.port),
        ..in_url.clone()
    };
    assert_eq!(ask(&right_in_url).await.unwrap(), Some(42.0));

    // TLS: the certificate names prometheus.test, not 127.0.0.1, and chains to our CA only.
    let no_name = Provider {
        tls: concurrency_operator::prometheus::provider::Tls {
            server_name: None,
            ..team_a.tls.clone()
        },
        ..team_a.clone()
    };
    let e = ask(&no_name).await.unwrap_err();
    assert!(
        e.to_string().to_lowercase().contains("certificate"),
        "a hostname mismatch must be refused: {e}"
    );
    let skip = Provider {
        tls: concurrency_operator::prometheus::provider::Tls {
            insecure_skip_verify: true,
            ..Default::default()
        },
        ..team_a.clone()
    };
    assert_eq!(ask(&skip).await.unwrap(), Some(42.0), "insecureSkipVerify");

    // The refusals an experiment gets before any query.
    let e = config
        .resolve(&source("credentials: team-a"), "billing")
        .unwrap_err();
    assert!(e.to_string().contains("namespace billing"), "{e}");
    let e = config
        .resolve(
            &source(&format!("credentials: team-a\nurl: {prefix}")),
            "shop",
        )
        .unwrap_err();
    assert!(e.to_string().contains("may only be sent to"), "{e}");
}
