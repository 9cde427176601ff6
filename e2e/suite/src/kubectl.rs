//! The `kubectl concurrency` plugin, driven as a person would.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::Result;

/// The plugin binary: KUBECTL_CONCURRENCY, or the one cargo built beside this binary (the
/// demo's `target/debug/demo`) or above it (a test's `target/debug/deps/<test>`); e2e/run and
/// e2e/demo build it.
fn plugin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("KUBECTL_CONCURRENCY") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("no directory above this binary")?;
    let bin = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("kubectl-concurrency"))
        .find(|b| b.exists());
    bin.with_context(|| {
        format!(
            "no kubectl-concurrency beside or above {}: cargo build --bin kubectl-concurrency \
             (or set KUBECTL_CONCURRENCY)",
            exe.display()
        )
    })
}

/// `kubectl concurrency ARGS…`: whether it exited 0, and its stdout and stderr together.
pub async fn kc(args: &[&str]) -> Result<(bool, String)> {
    let (ok, stdout, stderr) = kc_apart(args).await?;
    Ok((ok, format!("{stdout}{stderr}")))
}

/// `kubectl concurrency ARGS…`: whether it exited 0, its stdout (what `> FILE` keeps) and its
/// stderr.
pub async fn kc_apart(args: &[&str]) -> Result<(bool, String, String)> {
    let out = tokio::process::Command::new(plugin()?)
        .args(args)
        .output()
        .await
        .context("running kubectl-concurrency")?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `kubectl concurrency ARGS…` writing to this process's own stdout and stderr, as a person
/// sees it (e.g. `get NAME -w`); whether it exited 0.
pub async fn kc_shown(args: &[&str]) -> Result<bool> {
    let status = tokio::process::Command::new(plugin()?)
        .args(args)
        .status()
        .await
        .context("running kubectl-concurrency")?;
    Ok(status.success())
}

/// `kubectl concurrency ARGS…` started in the background with stdout piped (e.g. `get -w`),
/// killed when dropped.
pub fn kc_spawn(args: &[&str]) -> Result<tokio::process::Child> {
    kc_spawn_logged(args, std::process::Stdio::piped())
}

/// [`kc_spawn`] with its stderr going to `log` (a file, say).
fn kc_spawn_logged(args: &[&str], log: std::process::Stdio) -> Result<tokio::process::Child> {
    tokio::process::Command::new(plugin()?)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting kubectl-concurrency")
}

/// `kubectl concurrency report NAME` of a finished experiment, checked against its status:
/// every analysis status keeps is in the report's table with the same values and verdicts,
/// and every queried check was redrawn from Prometheus for both variants. The page is kept
/// in `artifacts/e2e/` of the checkout. Returns the page.
pub async fn report_matches_status(
    ns: &str,
    exp: &concurrency_operator::api::ConcurrencyExperiment,
) -> Result<String> {
    use kube::ResourceExt;
    let name = exp.name_any();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/e2e");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{ns}-{name}.html"));
    let prometheus = std::env::var("PROMETHEUS_URL").context("PROMETHEUS_URL is not set")?;
    let file_arg = file.display().to_string();
    let (ok, out) = kc(&[
        "-n",
        ns,
        "report",
        &name,
        "--prometheus",
        &prometheus,
        "-o",
        &file_arg,
    ])
    .await?;
    anyhow::ensure!(ok, "report failed: {out}");
    let html = std::fs::read_to_string(&file)?;
    let rows: Vec<[String; 5]> = html
        .split(r#"<tr class="analysis" "#)
        .skip(1)
        .map(|row| {
            [
                "data-at",
                "data-check",
                "data-baseline",
                "data-candidate",
                "data-verdict",
            ]
            .map(|a| attr(row, a).unwrap_or_default())
        })
        .collect();
    let status = exp.status.clone().unwrap_or_default();
    let mut want = Vec::new();
    for a in &status.analyses {
        for c in &a.checks {
            let raw = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            want.push([
                a.at.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                c.name.clone(),
                raw(c.baseline),
                raw(c.candidate),
                c.verdict.as_str().to_string(),
            ]);
        }
    }
    anyhow::ensure!(
        rows == want,
        "the report's analyses differ from status:\nreport {rows:?}\nstatus {want:?}"
    );
    // Every analysis on the traffic chart exactly once: from the operator's counter when this
    // Prometheus scrapes the operator (the weight's source says so), and from status for
    // those that ended after the counter's last scrape before the report.
    if html.contains("from the operator&#39;s gauge")
        && status.analyses.len() < concurrency_operator::api::KEPT_ANALYSES
    {
        let traffic = html
            .split(r#"<figure data-chart="weight">"#)
            .nth(1)
            .and_then(|s| s.split("</figure>").next())
            .context("no traffic chart")?;
        let counted: usize = traffic
            .split(r#"<circle class="marker "#)
            .skip(1)
            .filter_map(|m| attr(m, "data-count")?.parse::<usize>().ok())
            .sum();
        let kept = status.analyses.len();
        anyhow::ensure!(
            counted == kept,
            "the traffic chart marks {counted} analyses; status has {kept}"
        );
    }
    for check in &exp.spec.analysis.checks {
        if concurrency_operator::analysis::is_headroom(check) {
            continue;
        }
        let check = check.display_name();
        let section = html
            .split(&format!(r#"<section class="check" data-check="{check}">"#))
            .nth(1)
            .and_then(|s| s.split("</section>").next())
            .with_context(|| format!("no chart for check {check}"))?;
        for variant in ["baseline", "candidate"] {
            let points = section
                .split(&format!(
                    r#"<g class="series {variant}" data-series="{variant}" "#
                ))
                .nth(1)
                .and_then(|s| attr(s, "data-points"))
                .and_then(|p| p.parse::<usize>().ok())
                .unwrap_or(0);
            anyhow::ensure!(
                points > 0,
                "check {check}: no {variant} series redrawn from Prometheus in the report"
            );
        }
    }
    Ok(html)
}

/// The value of `name="…"` in the first tag of `html`.
fn attr(html: &str, name: &str) -> Option<String> {
    let tag = html.split('>').next()?;
    let value = tag
        .split(&format!(r#"{name}=""#))
        .nth(1)?
        .split('"')
        .next()?;
    Some(
        value
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// `kubectl concurrency dashboard --port 0` against the cluster, stopped when dropped.
pub struct Dashboard {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/`, as it printed.
    pub url: String,
    http: reqwest::Client,
}

impl Dashboard {
    /// Started on a free port, its watch synced (it prints its address only then).
    pub async fn start() -> Result<Dashboard> {
        Self::start_with(0, std::process::Stdio::piped()).await
    }

    /// Started on `port` (the demo's, for people to open), its log written to `log`.
    pub async fn start_on(port: u16, log: std::fs::File) -> Result<Dashboard> {
        Self::start_with(port, log.into()).await
    }

    async fn start_with(port: u16, log: std::process::Stdio) -> Result<Dashboard> {
        use tokio::io::AsyncBufReadExt;
        let prometheus = std::env::var("PROMETHEUS_URL").context("PROMETHEUS_URL is not set")?;
        let port = port.to_string();
        let args = ["dashboard", "--port", &port, "--prometheus", &prometheus];
        let mut child = kc_spawn_logged(&args, log)?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .context("the dashboard printed no address in 60 s")??
            .context("the dashboard exited")?;
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .with_context(|| format!("no address in {line:?}"))?
            .to_string();
        Ok(Dashboard {
            _child: child,
            url,
            http: reqwest::Client::new(),
        })
    }

    /// The page at `path` under its address (`""`: the experiments' list).
    pub async fn page(&self, path: &str) -> Result<String> {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .timeout(std::time::Duration::from_secs(120))
            .send()
            .await?;
        let status = r.status();
        let body = r.text().await?;
        anyhow::ensure!(status.is_success(), "GET {path}: {status}: {body}");
        Ok(body)
    }

    /// The phase the dashboard's row of `ns/name` shows (`None`: no row).
    pub async fn phase(&self, ns: &str, name: &str) -> Result<Option<String>> {
        let rows = self.page("rows").await?;
        let key = format!(r#"data-namespace="{ns}" data-name="{name}" "#);
        Ok(rows
            .split(&key)
            .nth(1)
            .and_then(|row| attr(row, "data-phase")))
    }

    /// Waits up to `secs` for the row of `ns/name` to show one of `phases`; returns it.
    pub async fn wait_phase(
        &self,
        ns: &str,
        name: &str,
        phases: &[&str],
        secs: u64,
    ) -> Result<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let seen = self.phase(ns, name).await?;
            if let Some(p) = seen.as_deref().filter(|p| phases.contains(p)) {
                return Ok(p.to_string());
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the dashboard shows {ns}/{name} as {seen:?} after {secs} s, not one of {phases:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// The report of `ns/name`, made through the dashboard.
    pub async fn report(&self, ns: &str, name: &str) -> Result<String> {
        self.page(&format!("report/{ns}/{name}")).await
    }
}
