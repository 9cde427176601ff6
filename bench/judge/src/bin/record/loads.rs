//! Each variant's load: the pair's rate throughout, or README's stages as per-stage loads.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use judge_bench::pairs::Pair;
use judge_bench::trace::Segment;

use crate::servers::Proc;

/// Load following `schedule` (requests/s, seconds; 0: none), in runs of at most the load
/// generator's longest (10 minutes), until its end or until `stop` — the recording's end never
/// leaves a load generator running.
pub fn start_load(
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
pub fn schedules(pair: &Pair, rate: u32, warmup: u64, secs: u64) -> [Vec<(u32, u64)>; 2] {
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
pub fn segments(pair: &Pair, secs: u64, step: u32) -> Vec<Segment> {
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
