//! `gvl-sim` servers and load generators as child processes, for the tests that analyse real
//! gvl-sim servers through a real Prometheus.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Kills the child on drop, also when an assertion fails.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn gvl_sim_binary() -> PathBuf {
    if let Ok(p) = std::env::var("GVL_SIM_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/<this test> → target/<profile>/gvl-sim
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("gvl-sim");
    assert!(
        bin.is_file(),
        "gvl-sim binary missing at {}: run `cargo build -p gvl-sim` first (or set GVL_SIM_BIN)",
        bin.display()
    );
    bin
}

/// Starts `gvl-sim serve` on a free loopback port with `env` (on top of `PORT=0`) and returns
/// it with its address; a server that could not start is its first line of stderr (a port
/// picked free by the caller can be taken by another process before gvl-sim binds it).
pub fn try_start_server(env: &[(&str, String)]) -> Result<(Proc, SocketAddr), String> {
    let mut child = Command::new(gvl_sim_binary())
        .args(["serve", "--bind", "127.0.0.1"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PORT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let Some(addr) = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(line);
    };
    // Keep draining so a chatty server never blocks on a full pipe.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    Ok((Proc(child), addr))
}

/// Open-model load at `rate` req/s for `secs` over `connections` connections.
pub fn start_load(addr: SocketAddr, rate: u32, secs: u64, connections: usize) -> Proc {
    Proc(
        Command::new(gvl_sim_binary())
            .args(["load", "--url", &format!("http://{addr}/")])
            .args([
                "--rate",
                &rate.to_string(),
                "--duration",
                &format!("{secs}s"),
            ])
            .args(["--connections", &connections.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The analysis of `storefront` vs `storefront-candidate` (container `web`) now, mid-experiment.
pub fn storefront_context(namespace: &str) -> concurrency_operator::analysis::AnalysisContext {
    concurrency_operator::analysis::AnalysisContext {
        namespace: namespace.into(),
        container: "web".into(),
        baseline_deployment: "storefront".into(),
        candidate_deployment: "storefront-candidate".into(),
        stage_index: 1,
        stage_started_at: None,
        weight: 50,
        now: jiff::Timestamp::now(),
        baseline_config: None,
        baseline_cpu_limit: None,
        candidate_cpu_limit: None,
        candidate_server: None,
    }
}
