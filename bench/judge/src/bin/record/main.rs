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

mod loads;
mod servers;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use clap::Parser;
use judge_bench::pairs::{pairs, Pair, Server};
use judge_bench::readback::{bounds_of, bucket_steps, increments, range, variant_series, Rows};
use judge_bench::trace::{Series, Trace};

use loads::{schedules, segments, start_load};
use servers::{free_port, memory_at_steps, now, sample_memory, start_server, Proc};

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
            let served = start_server(pair.server, &args.ruby_app, &gvl_sim, env)?;
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
        let mut rows = Vec::new();
        for metric in [
            "rails_request_duration_seconds_bucket",
            "rails_request_queue_time_seconds_bucket",
            "rails_requests_total",
            "process_resident_memory_bytes",
            "ruby_running_seconds_total",
            "ruby_io_wait_seconds_total",
        ] {
            rows.push(range(&client, &url, &q(metric), start, end, args.step).await?);
        }
        let [latency, queue, requests, memory, running, io_wait]: [Rows; 6] = rows
            .try_into()
            .map_err(|_| anyhow::anyhow!("six queries, six answers"))?;
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
