//! The `kubectl concurrency` plugin as a person uses it for a first experiment (README's "Your
//! first experiment"): `recommend` on the running Deployment, `init` for the starter manifest,
//! then `get -w` following it to the end, with `pause` and `resume` on the way and their
//! refusals where the phase does not allow them. (approve, abort, retry and history run in
//! the `retry` scenario; their mocked-API error paths in the crate's kubectl tests.)

use e2e_tests::{
    decision_of, ensure, eventually, from_spec, kc, kc_apart, kc_spawn, phase_of,
    prometheus_in_cluster, run, status, tolerant_check, MetricNames, Phase, Target, REPLICAS,
};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt as _;

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn plugin() {
    run("plugin", async |s| {
        // CPU 10 ms around 30 ms of I/O: an I/O share of about 75 %, where the Amdahl table
        // has a clear knee.
        // init's `memory` check (maxIncrease 20 %) on a Ruby pod's working set, not gvl-sim's
        // bare 2 MiB, where a fresh pod's few hundred KiB read as +22 % (sequential_judge).
        let target = Target {
            cpu_ms: 10,
            io_ms: 30,
            env: vec![
                ("WORKER_MEMORY_MB", "40".into()),
                ("THREAD_MEMORY_MB", "2".into()),
            ],
            ..Target::default()
        };
        s.deploy_target(&target).await?;
        s.start_load(420, 30).await?;
        let ns = s.ns.clone();
        let host_prom = std::env::var("PROMETHEUS_URL")?;
        let requests = MetricNames::default().requests_total;
        let rate = format!("sum(rate({requests}{{namespace=\"{ns}\"}}[1m]))");
        eventually(120, "the target's request rate in Prometheus", async || {
            Ok(s.prom.value(&rate).await?.is_some_and(|r| r > 5.0))
        })
        .await?;

        // recommend: measured from Prometheus, no experiment needed.
        let (ok, out) = kc(&[
            "-n",
            &ns,
            "recommend",
            "storefront",
            "--prometheus",
            &host_prom,
            "--window",
            "1m",
        ])
        .await?;
        ensure!(ok, "recommend failed: {out}");
        s.log(format!("recommend:\n{out}"));
        ensure!(
            out.contains(&format!("puma 2×6 ({REPLICAS}/{REPLICAS} ready)")),
            "recommend does not read back the target's config: {out}"
        );
        let share = io_share(&out).ok_or_else(|| anyhow::anyhow!("no I/O share in: {out}"))?;
        ensure!(
            (40.0..=90.0).contains(&share),
            "I/O share {share}% is not near the target's 75 %"
        );
        ensure!(
            out.contains("← now") && out.contains("← recommended"),
            "recommend marks neither the current nor the recommended threads: {out}"
        );

        // init: the starter manifest, read back from the running target, as `init … >
        // experiment.yaml` keeps it (stdout); what it warns about on stderr is in the manifest
        // too, as comments.
        let (ok, manifest, warnings) = kc_apart(&[
            "-n",
            &ns,
            "init",
            "storefront",
            "--threads",
            "4",
            "--prometheus",
            &host_prom,
        ])
        .await?;
        ensure!(ok, "init failed: {manifest}{warnings}");
        for w in warnings.lines().filter_map(|l| l.strip_prefix("warning: ")) {
            ensure!(
                manifest.contains(&format!("  # WARNING: {w}\n")),
                "init warned on stderr but not in the manifest: {w}\n{manifest}"
            );
        }
        ensure!(
            manifest.contains("# The target runs now (read back from container web): puma 2×6"),
            "init does not read back the target: {manifest}"
        );
        let mut doc: Value = serde_yaml::from_str(&manifest)
            .map_err(|e| anyhow::anyhow!("init's manifest is not YAML ({e}): {manifest}"))?;
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        ensure!(name == "storefront-puma-2x4", "init named it {name}");
        ensure!(
            doc["spec"]["candidate"] == json!({"server": "puma", "workers": 2, "threads": 4}),
            "init's candidate {}",
            doc["spec"]["candidate"]
        );
        // Applied as a person would after reviewing it, with the suite's short stages, the
        // in-cluster Prometheus and checks that tolerate a busy 2-core machine.
        let spec = &mut doc["spec"];
        spec["stages"] = json!([
            {"weight": 30, "duration": "20s"},
            {"weight": 70, "duration": "20s"},
            {"weight": 100, "duration": "20s"},
        ]);
        spec["analysis"]["prometheus"]["url"] = json!(prometheus_in_cluster());
        spec["analysis"]["interval"] = json!("10s");
        // init writes `judge: sequential`: the suite's 20-second stages at 30 req/s bring
        // fewer requests than its quantile tests need before any bound.
        spec["analysis"]["judge"] = json!("perInterval");
        spec["analysis"]["minRequests"] = json!(10);
        spec["analysis"]["checks"] = tolerant_check();
        s.create_cexp(from_spec(&name, spec.clone())?).await?;

        let mut follower = kc_spawn(&["-n", &ns, "get", &name, "-w", "--timeout", "5m"])?;
        s.wait_cexp(&name, 120, "first analysis", |e| {
            status(e).last_verdict.is_some()
        })
        .await?;

        let (ok, out) = kc(&["-n", &ns, "resume", &name]).await?;
        ensure!(
            !ok && out.contains("not paused (spec.paused is false)"),
            "resume of a running experiment: {out}"
        );
        let (ok, out) = kc(&["-n", &ns, "pause", &name]).await?;
        ensure!(
            ok && out.contains("paused (spec.paused: true)"),
            "pause: {out}"
        );
        let paused = s
            .wait_cexp(&name, 30, "phase Paused", |e| {
                phase_of(e) == Some(Phase::Paused)
            })
            .await?;
        let stage = status(&paused).stage;
        tokio::time::sleep(std::time::Duration::from_secs(35)).await;
        let e = s.cexp(&name).await?;
        ensure!(
            phase_of(&e) == Some(Phase::Paused) && status(&e).stage == stage,
            "not held at stage {stage:?} for 35 s: {:?} stage {:?}",
            phase_of(&e),
            status(&e).stage
        );
        let (ok, out) = kc(&["-n", &ns, "get", &name]).await?;
        ensure!(
            ok && out
                .lines()
                .any(|l| l.starts_with("Phase:") && l.contains("Paused")),
            "get does not show Paused: {out}"
        );
        let (ok, out) = kc(&["-n", &ns, "resume", &name]).await?;
        ensure!(
            ok && out.contains("resumed (spec.paused: false)"),
            "resume: {out}"
        );

        let e = s.wait_phase(&name, 240, Phase::Succeeded).await?;
        ensure!(
            decision_of(&e) == "Promote/StagesPassed",
            "decision {}",
            decision_of(&e)
        );
        let done = follower.wait().await?;
        let mut watched = String::new();
        if let Some(mut out) = follower.stdout.take() {
            out.read_to_string(&mut watched).await?;
        }
        let mut err = String::new();
        if let Some(mut e) = follower.stderr.take() {
            e.read_to_string(&mut err).await?;
        }
        s.log(format!("get -w:\n{watched}{err}"));
        ensure!(done.success(), "get -w exited {done}: {err}");
        for phase in ["Progressing", "Paused", "Succeeded"] {
            ensure!(
                watched
                    .lines()
                    .any(|l| l.starts_with("» ") && l.contains(&format!("  {phase}  "))),
                "get -w has no line for phase {phase}"
            );
        }
        let passes = watched.lines().filter(|l| l.contains("→ ✓ Pass")).count();
        ensure!(
            passes >= 3,
            "get -w shows {passes} passed analyses, not ≥ 3"
        );
        ensure!(
            watched.lines().any(|l| l.starts_with("Decision: Promote")),
            "get -w has no decision line"
        );
        ensure!(
            watched
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("Recommendation:")),
            "get -w does not end with the finished experiment's view"
        );

        let (ok, out) = kc(&["-n", &ns, "pause", &name]).await?;
        ensure!(
            !ok && out.trim().lines().count() == 1 && out.contains("is Succeeded"),
            "pause after the end: {out}"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(threads == "4", "target runs {threads} threads, not 4");
        s.assert_target_intact(REPLICAS).await
    })
    .await;
}

/// The percentage on recommend's `I/O share p` line.
fn io_share(out: &str) -> Option<f64> {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("I/O share p"))?;
    let pct = line.split_whitespace().find(|w| w.ends_with('%'))?;
    pct.trim_end_matches('%').parse().ok()
}
