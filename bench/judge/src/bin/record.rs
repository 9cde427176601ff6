//! `record`: runs pairs of real gvl-sim servers side by side on loopback, each variant under its
//! own open-model load (with `X-Request-Start`, as a load balancer sends), all scraped by a real
//! Prometheus every second; then reads every pair's counters back from Prometheus per step and
//! writes one trace per pair. Pairs run at once, so they share the machine as pods share a
//! node — the noise an A/A experiment must not mistake for a regression.
//!
//! `cargo run --release -p judge-bench --bin record -- --minutes 40`
//! Needs `gvl-sim` (`--gvl-sim`, default: next to this binary) and `prometheus` (Debian's).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Parser;
use judge_bench::pairs::{pairs, Pair};
use judge_bench::readback::{bounds_of, bucket_steps, increments, range, variant_series};
use judge_bench::trace::{Series, Trace};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 40)]
    minutes: u64,
    /// Requests per second sent to each variant.
    #[arg(long, default_value_t = 25)]
    rate: u32,
    #[arg(long, default_value_t = 5)]
    step: u32,
    #[arg(long, default_value = "bench/judge/traces")]
    out: PathBuf,
    #[arg(long)]
    gvl_sim: Option<PathBuf>,
    #[arg(long, default_value = "/usr/bin/prometheus")]
    prometheus: PathBuf,
    /// Record only these pairs (default: all).
    #[arg(long)]
    only: Vec<String>,
}

/// Kills the child on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(bin: &Path, env: &[(&str, String)]) -> anyhow::Result<(Proc, SocketAddr)> {
    let mut child = Command::new(bin)
        .args(["serve", "--bind", "127.0.0.1"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PORT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut stderr = BufReader::new(child.stderr.take().context("stderr")?);
    let mut line = String::new();
    stderr.read_line(&mut line)?;
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("gvl-sim did not start: {line}"))?;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    Ok((Proc(child), addr))
}

/// Load for `secs`, in segments of the load generator's longest run (10 minutes), until then
/// or until `stop` — the recording's end never leaves a load generator running.
fn start_load(
    bin: &Path,
    addr: SocketAddr,
    rate: u32,
    secs: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let bin = bin.to_path_buf();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(secs);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let segment = left.as_secs().clamp(1, 600);
            let Ok(child) = Command::new(&bin)
                .args(["load", "--url", &format!("http://{addr}/")])
                .args([
                    "--rate",
                    &rate.to_string(),
                    "--duration",
                    &format!("{segment}s"),
                ])
                .args(["--connections", "16"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            else {
                return;
            };
            let mut child = Proc(child);
            while matches!(child.0.try_wait(), Ok(None)) {
                if stop.load(Ordering::Relaxed) {
                    return; // Proc's drop kills it.
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            if segment <= 1 {
                return;
            }
        }
    })
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let gvl_sim = match &args.gvl_sim {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("gvl-sim"),
    };
    if !gvl_sim.is_file() || !args.prometheus.is_file() {
        bail!(
            "needs gvl-sim at {} and prometheus at {}",
            gvl_sim.display(),
            args.prometheus.display()
        );
    }
    let pairs: Vec<Pair> = pairs()
        .into_iter()
        .filter(|p| args.only.is_empty() || args.only.iter().any(|o| o == p.name))
        .collect();
    let mut servers = Vec::new();
    let mut targets = String::new();
    let mut addrs = Vec::new();
    for pair in &pairs {
        for (variant, env) in [("baseline", &pair.baseline), ("candidate", &pair.candidate)] {
            let (proc, addr) = start_server(&gvl_sim, env)?;
            servers.push(proc);
            addrs.push((pair.rate.unwrap_or(args.rate), addr));
            targets.push_str(&format!(
                "      - targets: ['{addr}']\n        labels: {{pair: '{}', variant: {variant}}}\n",
                pair.name
            ));
        }
    }
    let dir = std::env::temp_dir().join(format!("judge-record-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("data"))?;
    std::fs::write(
        dir.join("prometheus.yml"),
        format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: gvl-sim\n    static_configs:\n{targets}"),
    )?;
    let port = free_port()?;
    let _prometheus = Proc(
        Command::new(&args.prometheus)
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
            .stderr(Stdio::null())
            .spawn()?,
    );
    let url = format!("http://127.0.0.1:{port}");
    let secs = args.minutes * 60;
    // 20 s of warm-up (connections, first scrapes) are not recorded.
    let warmup = 20.0;
    let stop = Arc::new(AtomicBool::new(false));
    let loads: Vec<_> = addrs
        .iter()
        .map(|(rate, addr)| {
            start_load(
                &gvl_sim,
                *addr,
                *rate,
                secs + warmup as u64 + 5,
                stop.clone(),
            )
        })
        .collect();
    let started = now();
    eprintln!(
        "recording {} pairs for {} min ({url})",
        pairs.len(),
        args.minutes
    );
    tokio::time::sleep(Duration::from_secs(secs + warmup as u64 + 3)).await;
    stop.store(true, Ordering::Relaxed);
    let (start, end) = (started + warmup, started + warmup + secs as f64);
    let client = reqwest::Client::new();
    std::fs::create_dir_all(&args.out)?;
    for pair in &pairs {
        let q = |metric: &str| format!("{metric}{{pair=\"{}\"}}", pair.name);
        let latency = range(
            &client,
            &url,
            &q("rails_request_duration_seconds_bucket"),
            start,
            end,
            args.step,
        )
        .await?;
        let queue = range(
            &client,
            &url,
            &q("rails_request_queue_time_seconds_bucket"),
            start,
            end,
            args.step,
        )
        .await?;
        let requests = range(
            &client,
            &url,
            &q("rails_requests_total"),
            start,
            end,
            args.step,
        )
        .await?;
        let memory = range(
            &client,
            &url,
            &q("process_resident_memory_bytes"),
            start,
            end,
            args.step,
        )
        .await?;
        let (latency_bounds, queue_bounds) = (bounds_of(&latency), bounds_of(&queue));
        let series = |variant: &str| {
            let sum = |errors_only: bool| {
                let mut total: Vec<f64> = Vec::new();
                for (l, v) in variant_series(&requests, variant) {
                    let status = l.get("status").map(String::as_str).unwrap_or("");
                    if errors_only && !status.starts_with('5') {
                        continue;
                    }
                    let inc = increments(v);
                    total.resize(inc.len().max(total.len()), 0.0);
                    for (t, x) in total.iter_mut().zip(inc) {
                        *t += x;
                    }
                }
                total
            };
            Series {
                requests: sum(false),
                errors: sum(true),
                latency: bucket_steps(&latency, variant, &latency_bounds),
                queue: bucket_steps(&queue, variant, &queue_bounds),
                memory: variant_series(&memory, variant)
                    .next()
                    .map(|(_, v)| v.iter().skip(1).copied().collect())
                    .unwrap_or_default(),
            }
        };
        let env =
            |e: &[(&str, String)]| e.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let trace = Trace {
            name: pair.name.into(),
            regression: pair.regression.map(String::from),
            recorded: format!(
                "{:.0} (unix seconds), {} min, this repository's CI machine",
                started, args.minutes
            ),
            step_seconds: args.step,
            rate: pair.rate.unwrap_or(args.rate),
            baseline_env: env(&pair.baseline),
            candidate_env: env(&pair.candidate),
            baseline: series("baseline"),
            candidate: series("candidate"),
            latency_bounds: latency_bounds.clone(),
            queue_bounds: queue_bounds.clone(),
        };
        let path = args.out.join(format!("{}.json", pair.name));
        std::fs::write(&path, serde_json::to_string(&trace)?)?;
        let requests: f64 = trace.baseline.requests.iter().sum();
        eprintln!(
            "{}: {} steps, {requests:.0} baseline requests",
            path.display(),
            trace.steps()
        );
    }
    drop(servers);
    for l in loads {
        let _ = l.join();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
