//! The demo's experiments (`e2e/demo` runs this once the cluster, the images and the operator
//! are up): the storefront (gvl-sim as Puma 2 workers × 6 threads, I/O-heavy requests) in
//! namespace `demo` under open-model load; experiment 1 moves it to Puma 2×4 through
//! 30/70/100 to promotion; experiment 2 tries Puma 1×1 and is rolled back automatically
//! because it cannot keep up; experiment 3 runs three candidates at once against a fresh
//! baseline, eliminates what fails, and rolls out the one with the least memory.
//!
//! Each is followed as README's first experiment is, with `kubectl concurrency get NAME -w`
//! (its tables are the plugin's own), and fails the demo unless it ends as said above. Each
//! one's report (`kubectl concurrency report`) is written to artifacts/demo/NAME.html
//! (DEMO_REPORTS); `kubectl concurrency dashboard` serves them all live on
//! http://127.0.0.1:18080/ (DEMO_DASHBOARD_PORT) while the demo runs. The namespace stays
//! afterwards, to look around.
//!
//! Settings (environment): DEMO_NS (demo), DEMO_RATE (60 requests/s), DEMO_STAGE_S (40),
//! DEMO_INTERVAL_S (20), DEMO_SELECTION_S (120), DEMO_REPORTS, DEMO_DASHBOARD_PORT (18080),
//! DEMO_SETUP_S (the seconds e2e/demo took to get here, for the timing line); PROMETHEUS_URL
//! (required: the reports are drawn from it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Instant;

use anyhow::{anyhow, ensure, Context as _};
use e2e_tests::{kc_apart, kc_shown, name_of, status, ConcurrencyExperiment, Dashboard, Exp};
use e2e_tests::{Result, Scenario, Target};
use serde_json::{json, Value};

/// What the environment may change.
struct Settings {
    ns: String,
    rate: u32,
    stage_s: u32,
    interval_s: u32,
    selection_s: u32,
    reports: PathBuf,
    dashboard_port: u16,
    setup_s: u64,
    prometheus: String,
}

/// `var` parsed, `default` when unset; an unparsable value is an error naming it.
fn setting<T: FromStr>(var: &str, default: T) -> Result<T> {
    match std::env::var(var) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{var}={v:?} is not a valid value")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> Result<Self> {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let root = root.canonicalize().unwrap_or(root);
        Ok(Settings {
            ns: setting("DEMO_NS", "demo".to_string())?,
            // 60 requests/s of 2 ms CPU + 60 ms I/O: Puma 2×4 keeps up easily, one thread per
            // pod does not (a 1×1 pod serves at most ~16 requests/s of 62 ms; its third of the
            // load is ~20).
            rate: setting("DEMO_RATE", 60)?,
            stage_s: setting("DEMO_STAGE_S", 40)?,
            // cAdvisor's memory samples come every ~15 s here; 20 s windows always hold one.
            interval_s: setting("DEMO_INTERVAL_S", 20)?,
            selection_s: setting("DEMO_SELECTION_S", 120)?,
            reports: setting("DEMO_REPORTS", root.join("artifacts/demo"))?,
            dashboard_port: setting("DEMO_DASHBOARD_PORT", 18080)?,
            setup_s: setting("DEMO_SETUP_S", 0)?,
            prometheus: std::env::var("PROMETHEUS_URL").context("PROMETHEUS_URL is not set")?,
        })
    }
}

/// Latency is the server's own request time; queue time (from the X-Request-Start header the
/// load sets, as a load balancer does) is the wait for a free thread, which latency cannot see.
fn checks() -> Value {
    json!([
        {"metric": "latency", "quantile": 0.9, "maxIncrease": "50%", "max": "250ms"},
        {"metric": "queueTime", "quantile": 0.9, "max": "50ms"},
        {"metric": "errorRate", "max": "2%"},
        {"metric": "memory", "maxIncrease": "30%"},
        {"metric": "gvlWait", "max": "5%"},
    ])
}

/// The storefront: Puma 2×6 on three pods, with resident memory shaped like a Rails app (seed
/// 004: ~80 MiB per booted worker; 4 MiB per thread is a modelling choice), so the memory
/// column compares configs, not noise.
fn storefront() -> Target {
    Target {
        memory_limit: "512Mi".into(),
        env: vec![
            ("WORKER_MEMORY_MB", "80".into()),
            ("THREAD_MEMORY_MB", "4".into()),
        ],
        ..Target::default()
    }
}

/// The checks that failed in analyses that failed as a whole (a check can fail inside an
/// Inconclusive one), sorted.
fn failed_checks(e: &ConcurrencyExperiment) -> Vec<String> {
    let mut names: Vec<String> = status(e)
        .analyses
        .iter()
        .filter(|a| name_of(&a.verdict) == "Fail")
        .flat_map(|a| a.checks.iter())
        .filter(|c| name_of(&c.verdict) == "Fail")
        .map(|c| c.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn banner(what: &str) {
    println!("\n== {what}\n");
}

struct Demo<'a> {
    s: &'a Scenario,
    set: &'a Settings,
}

impl Demo<'_> {
    fn exp(&self, name: &str, candidate: Value) -> Exp {
        Exp::new(name, candidate, checks())
            .stage_s(self.set.stage_s)
            .interval_s(self.set.interval_s)
    }

    /// Follows `name` to its end with the plugin (at most `secs`), writes its report, and
    /// fails unless it ended in `want` and, with `check`, an analysis failed on that check
    /// (the one that decided a rollback).
    async fn follow(&self, name: &str, want: &str, secs: u32, check: Option<&str>) -> Result {
        let ns = self.s.ns.as_str();
        let timeout = format!("{secs}s");
        let followed = kc_shown(&["-n", ns, "get", name, "-w", "--timeout", &timeout]).await?;
        ensure!(followed, "{name} did not finish in {secs} s");
        let file = self.set.reports.join(format!("{name}.html"));
        let file = file.display().to_string();
        let report = [
            "-n",
            ns,
            "report",
            name,
            "--prometheus",
            &self.set.prometheus,
        ];
        let (ok, _, err) = kc_apart(&[&report[..], &["-o", &file]].concat()).await?;
        ensure!(ok, "no report of {name}: {err}");
        let e = self.s.cexp(name).await?;
        let phase = name_of(&status(&e).phase);
        ensure!(phase == want, "{name} ended {phase}, not {want}");
        if let Some(check) = check {
            let failed = failed_checks(&e);
            ensure!(
                failed.iter().any(|c| c == check),
                "{name}: expected check {check} to fail; failed: {}",
                if failed.is_empty() {
                    "none".into()
                } else {
                    failed.join(" ")
                }
            );
        }
        Ok(())
    }

    async fn run(&self, dashboard: &Dashboard) -> Result<[u64; 3]> {
        let (s, set) = (self.s, self.set);
        let t0 = Instant::now();
        banner("Experiment 1: Puma 2×6 → Puma 2×4 (fewer threads, same throughput?)");
        let two_by_four = json!({"server": "puma", "workers": 2, "threads": 4});
        s.apply(&self.exp("fewer-threads", two_by_four)).await?;
        self.follow("fewer-threads", "Succeeded", 600, None).await?;
        let first = t0.elapsed().as_secs();

        banner("Experiment 2: Puma 2×4 → Puma 1×1 (one thread per pod: can it keep up?)");
        s.start_load(600, set.rate).await?;
        let one_by_one = json!({"server": "puma", "workers": 1, "threads": 1});
        s.apply(&self.exp("one-thread", one_by_one)).await?;
        self.follow("one-thread", "RolledBack", 600, Some("queueTime"))
            .await?;
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(
            threads == "4",
            "the target runs {threads} threads after the rollback, not Puma 2×4's 4"
        );
        let second = t0.elapsed().as_secs() - first;

        banner(
            "Experiment 3: which config is best? Puma 1×1, Puma 2×3 and Falcon 2 against a \
             fresh Puma 2×4",
        );
        // All three side by side with a fresh copy of the target (young pods against young
        // pods: Ruby memory grows with a pod's age), one pod each; the lowest memory among
        // those passing every check wins and walks 30/70/100.
        s.start_load(600, set.rate).await?;
        let candidates = json!([
            {"server": "puma", "workers": 1, "threads": 1},
            {"server": "puma", "workers": 2, "threads": 3},
            {"server": "falcon", "workers": 2},
        ]);
        let selection = json!({
            "duration": format!("{}s", set.selection_s),
            "objective": {"minimize": "memory"},
        });
        let best = Exp::selecting("best-config", candidates, selection, checks())
            .stage_s(set.stage_s)
            .interval_s(set.interval_s);
        s.apply(&best).await?;
        self.follow("best-config", "Succeeded", 900, None).await?;
        let third = t0.elapsed().as_secs() - first - second;

        // The dashboard's page at the end, kept beside the reports (the e2e scenario
        // `promote` checks the dashboard against a live experiment).
        let page = set.reports.join("dashboard.html");
        match dashboard.page("").await {
            Ok(html) => std::fs::write(&page, html)?,
            Err(e) => eprintln!("the dashboard did not answer: {e:#}"),
        }
        Ok([first, second, third])
    }
}

async fn demo() -> Result {
    let set = Settings::from_env()?;
    let s = Scenario::in_namespace("demo", &set.ns).await?;
    s.deploy_target(&storefront()).await?;
    s.start_load(600, set.rate).await?;
    println!(
        "storefront: Puma 2×6 × 3 pods under {} requests/s (2 ms CPU + 60 ms I/O each)",
        set.rate
    );
    std::fs::create_dir_all(&set.reports)
        .with_context(|| format!("creating {}", set.reports.display()))?;
    // Read-only, on loopback, for people to watch the experiments live; stopped with the demo.
    let log = std::fs::File::create(set.reports.join("dashboard.log"))?;
    let dashboard = Dashboard::start_on(set.dashboard_port, log).await?;
    println!(
        "dashboard: {} (kubectl concurrency dashboard)",
        dashboard.url
    );
    let ran = Demo { s: &s, set: &set }.run(&dashboard).await;
    // Load is bounded anyway; stopped so the cluster is quiet to look around.
    s.stop_load().await;
    let [first, second, third] = ran?;
    banner("Done");
    println!(
        "setup {} s, experiment 1 {first} s, experiment 2 {second} s, experiment 3 {third} s, \
         total {} s",
        set.setup_s,
        set.setup_s + first + second + third
    );
    println!(
        "reports: {}/{{fewer-threads,one-thread,best-config}}.html; dashboard: {} (stopped \
         with the demo)",
        set.reports.display(),
        dashboard.url
    );
    let ns = &set.ns;
    println!("kubectl -n {ns} get cexp; kubectl -n {ns} describe cexp one-thread   # look around");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    // Both ring and aws-lc-rs are in the tree: rustls cannot pick one by itself.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match demo().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_analyses(analyses: Value) -> ConcurrencyExperiment {
        let mut e = e2e_tests::from_spec(
            "one-thread",
            json!({"targetRef": {"name": "storefront"}, "candidate": {"server": "puma"},
                   "analysis": {"prometheus": {"url": "http://p:9090"}, "checks": []}}),
        )
        .unwrap();
        let status = json!({"phase": "RolledBack", "analyses": analyses});
        e.status = Some(serde_json::from_value(status).unwrap());
        e
    }

    fn analysis(verdict: &str, checks: &[(&str, &str)]) -> Value {
        let checks: Vec<Value> = checks
            .iter()
            .map(|(name, v)| json!({"name": name, "limit": "max 50ms", "verdict": v}))
            .collect();
        json!({"at": "2026-12-06T23:00:00Z", "stageIndex": 0, "weight": 30,
               "verdict": verdict, "checks": checks})
    }

    #[test]
    fn only_checks_that_failed_in_failed_analyses_count() {
        let e = with_analyses(json!([
            // A check can fail inside an Inconclusive analysis: not what decided.
            analysis(
                "Inconclusive",
                &[("latency", "Fail"), ("errorRate", "Pass")]
            ),
            analysis("Fail", &[("queueTime", "Fail"), ("memory", "Pass")]),
            analysis("Fail", &[("queueTime", "Fail"), ("gvlWait", "Fail")]),
        ]));
        assert_eq!(failed_checks(&e), ["gvlWait", "queueTime"]);
        assert!(failed_checks(&with_analyses(json!([]))).is_empty());
    }

    #[test]
    fn a_bad_setting_is_named() {
        std::env::set_var("DEMO_TEST_RATE", "sixty");
        let e = setting("DEMO_TEST_RATE", 60u32).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"DEMO_TEST_RATE="sixty" is not a valid value"#
        );
        std::env::set_var("DEMO_TEST_RATE", " 45 ");
        assert_eq!(setting("DEMO_TEST_RATE", 60u32).unwrap(), 45);
        assert_eq!(setting("DEMO_TEST_UNSET", 60u32).unwrap(), 60);
    }
}
