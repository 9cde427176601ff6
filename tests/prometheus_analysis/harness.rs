//! The parts of the real-Prometheus test that are plumbing: loopback exporters serving the
//! Prometheus text format, and a Prometheus child process with its own config and storage.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concurrency_operator::prometheus::PrometheusClient;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::TokioIo;
use jiff::Timestamp;

/// Counters start as if the process had run this long, so `rate()` never sees a restart.
pub const UPTIME: f64 = 1000.0;
pub const BUCKETS: [&str; 6] = ["0.05", "0.1", "0.25", "0.5", "1", "+Inf"];

/// What one pod's exporter reports, as rates per second.
pub struct Pod {
    pub name: &'static str,
    pub rps: f64,
    pub error_share: f64,
    /// Cumulative share of requests at or below each of `BUCKETS`.
    pub cumulative: [f64; 6],
    pub mean_latency: f64,
    /// GVL wait as a share of request time.
    pub gvl_share: f64,
    /// io / (running + io + gvl).
    pub io_share: f64,
    pub memory: f64,
}

pub fn exposition(p: &Pod, t: f64) -> String {
    let requests = p.rps * t;
    let busy = requests * p.mean_latency;
    let gvl = busy * p.gvl_share;
    let io = busy * p.io_share;
    let running = busy - io - gvl;
    let mut out = String::new();
    out.push_str("# TYPE rails_request_duration_seconds histogram\n");
    for (le, share) in BUCKETS.iter().zip(p.cumulative) {
        out.push_str(&format!(
            "rails_request_duration_seconds_bucket{{le=\"{le}\"}} {}\n",
            requests * share
        ));
    }
    out.push_str(&format!(
        "rails_request_duration_seconds_sum {busy}\nrails_request_duration_seconds_count {requests}\n"
    ));
    out.push_str("# TYPE rails_requests_total counter\n");
    out.push_str(&format!(
        "rails_requests_total{{status=\"200\"}} {}\nrails_requests_total{{status=\"503\"}} {}\n",
        requests * (1.0 - p.error_share),
        requests * p.error_share
    ));
    for (name, v) in [
        ("ruby_gvl_wait_seconds_total", gvl),
        ("ruby_io_wait_seconds_total", io),
        ("ruby_running_seconds_total", running),
    ] {
        out.push_str(&format!("# TYPE {name} counter\n{name} {v}\n"));
    }
    out.push_str(&format!(
        "# TYPE container_memory_working_set_bytes gauge\ncontainer_memory_working_set_bytes {}\n",
        p.memory
    ));
    out
}

pub async fn serve(pod: Pod, started: Instant) -> SocketAddr {
    serve_text(move |t| exposition(&pod, t), started).await
}

/// Serves `text(t)` on loopback, `t` being the exporter's uptime in seconds.
pub async fn serve_text(
    text: impl Fn(f64) -> String + Send + Sync + 'static,
    started: Instant,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let text = Arc::new(text);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let text = text.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| {
                    let body = text(UPTIME + started.elapsed().as_secs_f64());
                    async move {
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            body,
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// Kills Prometheus and removes its files even when an assertion fails.
pub struct Prometheus {
    pub child: Child,
    pub dir: PathBuf,
    pub url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `PROMETHEUS_BIN` if set (it must exist: no silent fallback), else Debian's path.
pub fn prometheus_binary() -> PathBuf {
    let bin = std::env::var("PROMETHEUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/bin/prometheus"));
    assert!(
        bin.is_file(),
        "the prometheus binary is missing at {}: this test needs a real Prometheus. Install it \
         with `scripts/install-deps` (Debian package `prometheus`) or point \
         PROMETHEUS_BIN at one",
        bin.display()
    );
    bin
}

pub fn start_prometheus(namespace: &str, targets: &[(&str, SocketAddr)]) -> Prometheus {
    let bin = prometheus_binary();
    let dir = std::env::temp_dir().join(format!(
        "cexp-prom-{}-{}",
        std::process::id(),
        Timestamp::now().as_nanosecond()
    ));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let mut config = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: pods\n    static_configs:\n",
    );
    for (pod, addr) in targets {
        config.push_str(&format!(
            "      - targets: ['{addr}']\n        labels: {{namespace: {namespace}, pod: {pod}, container: web}}\n"
        ));
    }
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let child = Command::new(&bin)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("prometheus.log")).unwrap(),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", bin.display()));
    Prometheus {
        child,
        dir,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// Waits until every target has a full analysis window of samples.
/// Waits until every target has `window_secs` + 1 samples in the last `window_secs` + 2 s.
pub async fn wait_for_data(
    prom: &mut Prometheus,
    client: &PrometheusClient,
    targets: usize,
    window_secs: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let query = format!(
        "count(count_over_time(up[{}s]) >= {})",
        window_secs + 2,
        window_secs + 1
    );
    loop {
        if let Some(status) = prom.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(prom.dir.join("prometheus.log")).unwrap_or_default();
            panic!("prometheus exited with {status}:\n{log}");
        }
        if let Ok(Some(n)) = client.query_value(&query, Timestamp::now()).await {
            if n as usize == targets {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no full window of data after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
