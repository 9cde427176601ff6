//! `record`: runs pairs of real servers side by side on loopback (gvl-sim, and the Ruby
//! reference app under Puma), each variant under its own open-model load (with
//! `X-Request-Start`, as a load balancer sends), all scraped by a real Prometheus every second;
//! then reads every pair's counters back from Prometheus per step and writes one trace per
//! pair. Pairs run at once, so they share the machine as pods share a node — the noise an A/A
//! experiment must not mistake for a regression. A staged pair's loads follow README's stages:
//! the recording in equal stretches, the candidate sent 30, 70, then 100 % of the pair's rate
//! and the baseline the rest.
//!
//! `cargo run --release -p judge-bench --bin record -- --minutes 40`
//! Needs `gvl-sim` (`--gvl-sim`, default: next to this binary), `prometheus` (Debian's), and
//! for the Ruby pairs `ruby` and `puma` (Debian's) with `server-images/ruby/bin/serve`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Parser;
use judge_bench::pairs::{pairs, Pair, Server};
use judge_bench::readback::{bounds_of, bucket_steps, increments, range, variant_series};
use judge_bench::trace::{Segment, Series, Trace};

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
    /// The Ruby reference app's entry point.
    #[arg(long, default_value = "server-images/ruby/bin/serve")]
    ruby_app: PathBuf,
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

/// A child leading its own process group (the Ruby app: `bin/serve`, Puma's master and
/// worker, the delay server): the whole group is stopped on drop, TERM first.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let kill = |signal: &str| {
            let _ = Command::new("kill")
                .args([signal, "--", &group])
                .stderr(Stdio::null())
                .status();
        };
        kill("-TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        kill("-KILL");
        let _ = self.0.wait();
    }
}

/// A server's process, stopped on drop.
enum Running {
    One(Proc),
    Group(Group),
}

impl Running {
    fn id(&self) -> u32 {
        match self {
            Running::One(p) => p.0.id(),
            Running::Group(g) => g.0.id(),
        }
    }
}

/// A variant being served: the process, where its requests go and where Prometheus scrapes.
struct Served {
    proc: Running,
    addr: SocketAddr,
    metrics: SocketAddr,
}

fn start_server(
    server: Server,
    args: &Args,
    gvl_sim: &Path,
    env: &[(&str, String)],
) -> anyhow::Result<Served> {
    match server {
        Server::GvlSim => start_gvl_sim(gvl_sim, env),
        Server::Ruby => start_ruby(&args.ruby_app, env),
    }
}

fn start_gvl_sim(bin: &Path, env: &[(&str, String)]) -> anyhow::Result<Served> {
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
    Ok(Served {
        proc: Running::One(Proc(child)),
        addr,
        metrics: addr,
    })
}

/// The Ruby reference app on two free ports (requests; `/metrics` from `bin/serve` itself, so
/// a scrape never waits for a Puma thread), once both answer.
fn start_ruby(serve: &Path, env: &[(&str, String)]) -> anyhow::Result<Served> {
    let (port, metrics_port) = (free_port()?, free_port()?);
    let child = Command::new(serve)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PORT", port.to_string())
        .env("METRICS_PORT", metrics_port.to_string())
        .env("BIND_HOST", "127.0.0.1")
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", serve.display()))?;
    let mut proc = Group(child);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let metrics: SocketAddr = ([127, 0, 0, 1], metrics_port).into();
    let deadline = Instant::now() + Duration::from_secs(60);
    while [addr, metrics]
        .iter()
        .any(|a| std::net::TcpStream::connect_timeout(a, Duration::from_millis(200)).is_err())
    {
        if let Ok(Some(status)) = proc.0.try_wait() {
            bail!("{} exited: {status}", serve.display());
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not listen on {port} and {metrics_port} within 60 s",
                serve.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(Served {
        proc: Running::Group(proc),
        addr,
        metrics,
    })
}

/// Resident memory of a process and all its descendants (a container's processes), bytes.
fn tree_rss(root: u32) -> f64 {
    let mut parent = std::collections::HashMap::new();
    let mut rss = std::collections::HashMap::new();
    let page = 4096.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, …, rss (field 24).
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(ppid), Some(pages)) = (
            fields.get(1).and_then(|v| v.parse::<u32>().ok()),
            fields.get(21).and_then(|v| v.parse::<f64>().ok()),
        ) {
            parent.insert(pid, ppid);
            rss.insert(pid, pages * page);
        }
    }
    rss.iter()
        .filter(|(pid, _)| {
            let mut p = **pid;
            for _ in 0..64 {
                if p == root {
                    return true;
                }
                match parent.get(&p) {
                    Some(&pp) if pp != 0 => p = pp,
                    _ => return false,
                }
            }
            false
        })
        .map(|(_, v)| v)
        .sum()
}

/// Samples `tree_rss` of each root every second until `stop`: (unix seconds, bytes) per root.
/// For servers that do not write `process_resident_memory_bytes` (the Ruby app; on the
/// cluster the memory check reads the container's working set instead).
fn sample_memory(
    roots: Vec<u32>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Vec<(f64, f64)>>> {
    std::thread::spawn(move || {
        let mut samples = vec![Vec::new(); roots.len()];
        while !stop.load(Ordering::Relaxed) {
            for (root, out) in roots.iter().zip(samples.iter_mut()) {
                out.push((now(), tree_rss(*root)));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        samples
    })
}

/// The sample nearest each step's end (`start + step × (i + 1)`), for `steps` steps.
fn memory_at_steps(samples: &[(f64, f64)], start: f64, step: u32, steps: usize) -> Vec<f64> {
    (1..=steps)
        .map(|i| {
            let t = start + f64::from(step) * i as f64;
            samples
                .iter()
                .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
                .map_or(0.0, |s| s.1)
        })
        .collect()
}

/// Load following `schedule` (requests/s, seconds; 0: none), in runs of at most the load
/// generator's longest (10 minutes), until its end or until `stop` — the recording's end never
/// leaves a load generator running.
fn start_load(
    bin: &Path,
    addr: SocketAddr,
    schedule: Vec<(u32, u64)>,
    connections: u32,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let bin = bin.to_path_buf();
    std::thread::spawn(move || {
        for (rate, secs) in schedule {
            let end = Instant::now() + Duration::from_secs(secs);
            while let Some(left) = end.checked_duration_since(Instant::now()) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if rate == 0 {
                    std::thread::sleep(left.min(Duration::from_millis(200)));
                    continue;
                }
                let segment = left.as_secs().clamp(1, 600);
                let Ok(child) = Command::new(&bin)
                    .args(["load", "--url", &format!("http://{addr}/")])
                    .args([
                        "--rate",
                        &rate.to_string(),
                        "--duration",
                        &format!("{segment}s"),
                    ])
                    .args(["--connections", &connections.to_string()])
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
                    break;
                }
            }
        }
    })
}

/// Each variant's load over the recording (`secs` after `warmup`): the pair's rate throughout,
/// or per stage the candidate's share of it and the baseline the rest.
fn schedules(pair: &Pair, rate: u32, warmup: u64, secs: u64) -> [Vec<(u32, u64)>; 2] {
    if pair.stages.is_empty() {
        return [
            vec![(rate, warmup + secs + 5)],
            vec![(rate, warmup + secs + 5)],
        ];
    }
    let per = secs / pair.stages.len() as u64;
    let share = |w: i32| (f64::from(rate) * f64::from(w) / 100.0).round() as u32;
    let mut out = [Vec::new(), Vec::new()];
    for (i, &w) in pair.stages.iter().enumerate() {
        // The first stretch also warms up; the last runs 5 s past the recording's end.
        let d = per
            + if i == 0 { warmup } else { 0 }
            + if i + 1 == pair.stages.len() {
                secs % per.max(1) + 5
            } else {
                0
            };
        out[0].push((rate - share(w), d));
        out[1].push((share(w), d));
    }
    out
}

/// A staged pair's stretches, in steps of the recording.
fn segments(pair: &Pair, secs: u64, step: u32) -> Vec<Segment> {
    let n = pair.stages.len() as u64;
    pair.stages
        .iter()
        .enumerate()
        .map(|(i, &weight)| {
            let at = |k: u64| (secs * k / n.max(1) / u64::from(step)) as usize;
            Segment {
                weight,
                from: at(i as u64),
                to: at(i as u64 + 1),
            }
        })
        .collect()
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
    // Per variant: its load's address and schedule; the Ruby app's process for memory.
    let mut loads_of = Vec::new();
    let (warmup, secs) = (20u64, args.minutes * 60);
    for pair in &pairs {
        let rate = pair.rate.unwrap_or(args.rate);
        let schedules = schedules(pair, rate, warmup, secs);
        for ((variant, env), schedule) in
            [("baseline", &pair.baseline), ("candidate", &pair.candidate)]
                .into_iter()
                .zip(schedules)
        {
            let served = start_server(pair.server, &args, &gvl_sim, env)?;
            loads_of.push((served.addr, schedule, pair.connections));
            targets.push_str(&format!(
                "      - targets: ['{}']\n        labels: {{pair: '{}', variant: {variant}}}\n",
                served.metrics, pair.name
            ));
            servers.push((pair.name, variant, pair.server, served));
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
    let stop = Arc::new(AtomicBool::new(false));
    let ruby_roots: Vec<u32> = servers
        .iter()
        .filter(|s| s.2 == Server::Ruby)
        .map(|s| s.3.proc.id())
        .collect();
    let memory_sampler = sample_memory(ruby_roots, stop.clone());
    let loads: Vec<_> = loads_of
        .into_iter()
        .map(|(addr, schedule, connections)| {
            start_load(&gvl_sim, addr, schedule, connections, stop.clone())
        })
        .collect();
    let started = now();
    eprintln!(
        "recording {} pairs for {} min ({url})",
        pairs.len(),
        args.minutes
    );
    tokio::time::sleep(Duration::from_secs(secs + warmup + 3)).await;
    stop.store(true, Ordering::Relaxed);
    let memory_samples = memory_sampler.join().unwrap_or_default();
    let (start, end) = (started + warmup as f64, started + (warmup + secs) as f64);
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
        let running = range(
            &client,
            &url,
            &q("ruby_running_seconds_total"),
            start,
            end,
            args.step,
        )
        .await?;
        let io_wait = range(
            &client,
            &url,
            &q("ruby_io_wait_seconds_total"),
            start,
            end,
            args.step,
        )
        .await?;
        let (latency_bounds, queue_bounds) = (bounds_of(&latency), bounds_of(&queue));
        let steps = (secs / u64::from(args.step)) as usize;
        // The Ruby app's memory: the sampler's, in the order its roots were taken.
        let ruby_memory = |variant: &str| {
            let k = servers
                .iter()
                .filter(|s| s.2 == Server::Ruby)
                .position(|s| s.0 == pair.name && s.1 == variant)?;
            Some(memory_at_steps(
                memory_samples.get(k)?,
                start,
                args.step,
                steps,
            ))
        };
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
            let counter = |rows| {
                variant_series(rows, variant)
                    .next()
                    .map(|(_, v)| increments(v))
                    .unwrap_or_default()
            };
            let requests = sum(false);
            let mut errors = sum(true);
            // No 5xx series at all (the Ruby app writes a status only once answered): none.
            errors.resize(requests.len(), 0.0);
            Series {
                requests,
                errors,
                latency: bucket_steps(&latency, variant, &latency_bounds),
                queue: bucket_steps(&queue, variant, &queue_bounds),
                memory: ruby_memory(variant).unwrap_or_else(|| {
                    variant_series(&memory, variant)
                        .next()
                        .map(|(_, v)| v.iter().skip(1).copied().collect())
                        .unwrap_or_default()
                }),
                running: counter(&running),
                io_wait: counter(&io_wait),
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
            stages: segments(pair, secs, args.step),
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
