//! `WORKER_MEMORY_MB` / `THREAD_MEMORY_MB` make the server process's resident memory grow by
//! workers × worker + workers × pool threads × thread MiB. Each case runs the real binary as a
//! child and reads its VmRSS once it prints "listening on": the memory is allocated and written
//! before that line, so nothing here waits on timing. Children, not in-process servers,
//! because the tests of one binary share a process and each other's allocations.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const MIB: f64 = 1024.0 * 1024.0;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `gvl-sim serve` on a free loopback port with `vars` and returns it with its
/// resident memory in bytes, read after the server reported it was listening.
fn rss_when_listening(vars: &[(&str, &str)]) -> (Server, f64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gvl-sim"))
        .args(["serve", "--bind", "127.0.0.1"])
        .env_clear()
        .env("PORT", "0")
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let line = loop {
        let line = lines
            .next()
            .expect("gvl-sim exited before listening")
            .unwrap();
        if line.contains("listening on") {
            break line;
        }
    };
    eprintln!("{line}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.0.id())).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (server, kib * 1024.0)
}

/// The growth of RSS over the same server without simulated memory, in MiB.
fn growth_mib(base: &[(&str, &str)], memory: &[(&str, &str)]) -> f64 {
    let (_a, without) = rss_when_listening(base);
    let with: Vec<_> = base.iter().chain(memory).copied().collect();
    let (_b, with) = rss_when_listening(&with);
    let growth = (with - without) / MIB;
    eprintln!(
        "{base:?} {memory:?}: {:.1} -> {:.1} MiB, +{growth:.1}",
        without / MIB,
        with / MIB
    );
    growth
}

const MEMORY: [(&str, &str); 2] = [("WORKER_MEMORY_MB", "20"), ("THREAD_MEMORY_MB", "2")];

#[test]
fn puma_holds_worker_and_thread_memory() {
    // 1 worker × 20 + 1 × 3 threads × 2 = 26 MiB.
    let base = [
        ("SERVER", "puma"),
        ("WEB_CONCURRENCY", "1"),
        ("RAILS_MAX_THREADS", "3"),
    ];
    let growth = growth_mib(&base, &MEMORY);
    // At least 90 %; at most a few MiB of allocator slack over it.
    assert!((0.9 * 26.0..=26.0 + 6.0).contains(&growth), "+{growth} MiB");
}

#[test]
fn puma_memory_scales_with_workers_and_threads() {
    // 2 workers × 20 + 2 × 4 threads × 2 = 56 MiB.
    let base = [
        ("SERVER", "puma"),
        ("WEB_CONCURRENCY", "2"),
        ("RAILS_MAX_THREADS", "4"),
    ];
    let growth = growth_mib(&base, &MEMORY);
    assert!((0.9 * 56.0..=56.0 + 6.0).contains(&growth), "+{growth} MiB");
}

#[test]
fn falcon_holds_only_worker_memory() {
    // 2 workers × 20 = 40 MiB; RAILS_MAX_THREADS=5 would add 20 more if it counted.
    let base = [
        ("SERVER", "falcon"),
        ("WEB_CONCURRENCY", "2"),
        ("RAILS_MAX_THREADS", "5"),
    ];
    let growth = growth_mib(&base, &MEMORY);
    assert!((0.9 * 40.0..=40.0 + 6.0).contains(&growth), "+{growth} MiB");
}

#[test]
fn too_much_memory_is_refused_at_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_gvl-sim"))
        .args(["serve", "--bind", "127.0.0.1"])
        .env_clear()
        .env("PORT", "0")
        .env("WEB_CONCURRENCY", "8")
        .env("WORKER_MEMORY_MB", "600")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config_range") && stderr.contains("WORKER_MEMORY_MB"),
        "{stderr}"
    );
}
