//! The servers a recording runs — gvl-sim, and the Ruby reference app as a process group —
//! stopped when dropped, and the Ruby app's memory sampled from `/proc`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use judge_bench::pairs::Server;

/// Kills the child on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child leading its own process group (the Ruby app: `bin/serve`, Puma's master and
/// worker, the delay server): the whole group is stopped on drop, TERM first.
pub struct Group(Child);

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
pub enum Running {
    One(Proc),
    Group(Group),
}

impl Running {
    pub fn id(&self) -> u32 {
        match self {
            Running::One(p) => p.0.id(),
            Running::Group(g) => g.0.id(),
        }
    }
}

/// A variant being served: the process, where its requests go and where Prometheus scrapes.
pub struct Served {
    pub proc: Running,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
}

pub fn start_server(
    server: Server,
    ruby_app: &Path,
    gvl_sim: &Path,
    env: &[(&str, String)],
) -> anyhow::Result<Served> {
    match server {
        Server::GvlSim => start_gvl_sim(gvl_sim, env),
        Server::Ruby => start_ruby(ruby_app, env),
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
pub fn sample_memory(
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
pub fn memory_at_steps(samples: &[(f64, f64)], start: f64, step: u32, steps: usize) -> Vec<f64> {
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

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
