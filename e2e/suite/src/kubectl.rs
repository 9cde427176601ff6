//! The `kubectl concurrency` plugin, driven as a person would.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::Result;

/// The plugin binary: KUBECTL_CONCURRENCY, or the one cargo built beside this test binary
/// (`target/debug/deps/<test>` → `target/debug/kubectl-concurrency`; e2e/run builds it).
fn plugin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("KUBECTL_CONCURRENCY") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("kubectl-concurrency"))
        .context("no directory above the test binary")?;
    anyhow::ensure!(
        bin.exists(),
        "{} missing: cargo build --bin kubectl-concurrency (or set KUBECTL_CONCURRENCY)",
        bin.display()
    );
    Ok(bin)
}

/// `kubectl concurrency ARGS…`: whether it exited 0, and its stdout and stderr together.
pub async fn kc(args: &[&str]) -> Result<(bool, String)> {
    let out = tokio::process::Command::new(plugin()?)
        .args(args)
        .output()
        .await
        .context("running kubectl-concurrency")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// `kubectl concurrency ARGS…` started in the background with stdout piped (e.g. `get -w`),
/// killed when dropped.
pub fn kc_spawn(args: &[&str]) -> Result<tokio::process::Child> {
    tokio::process::Command::new(plugin()?)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting kubectl-concurrency")
}
