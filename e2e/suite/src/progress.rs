//! Following an experiment to its end: every change of its state printed, and the split the
//! candidate's pods observed while each effective weight was in force.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};

use crate::prom::split_within;
use crate::{name_of, phase_of, status, summary, ConcurrencyExperiment, Phase, Result, Scenario};

/// How [`Scenario::progress`] follows an experiment.
#[derive(Debug, Clone)]
pub struct Progress {
    /// No final phase within this: fail.
    pub timeout_s: u64,
    /// With it (percentage points), every Progressing window of at least 10 s must match the
    /// effective weight within it (a slow candidate holds its connections longer and gets
    /// fewer requests, so rollback scenarios only print it).
    pub split_tolerance: Option<i64>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            timeout_s: 300,
            split_tolerance: None,
        }
    }
}

impl Scenario {
    /// Follows the experiment (a watch) until it reaches a final phase, which it returns.
    pub async fn progress(&self, name: &str, opts: Progress) -> Result<ConcurrencyExperiment> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(opts.timeout_s);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut stream = watcher(self.cexps.clone(), config)
            .default_backoff()
            .applied_objects()
            .boxed();
        let (mut last_line, mut last_eff, mut since) =
            (String::new(), String::new(), Instant::now());
        loop {
            let next = tokio::time::timeout_at(deadline, stream.next()).await;
            let e = match next {
                Err(_) => {
                    let now = self.cexp(name).await.ok();
                    return Err(anyhow!(
                        "{name}: no final phase within {} s: {}",
                        opts.timeout_s,
                        summary(now.as_ref())
                    ));
                }
                Ok(None) => return Err(anyhow!("{name}: the watch ended")),
                Ok(Some(Err(e))) => {
                    self.log(format!("{name}: watch error (retried): {e}"));
                    continue;
                }
                Ok(Some(Ok(e))) => e,
            };
            let line = summary(Some(&e));
            if line != last_line {
                self.log(format!("{name}: {line}"));
                last_line = line;
            }
            // Planned vs observed split: when the effective weight changes, report the share of
            // requests the candidate's pods answered since the previous change.
            let s = status(&e);
            let eff = format!(
                "{}:{}/{}",
                s.phase.as_str(),
                s.planned_weight,
                s.effective_weight
            );
            if eff != last_eff {
                let held = since.elapsed().as_secs();
                if !last_eff.is_empty() && held >= 8 {
                    self.check_split(name, &last_eff, held - 3, opts.split_tolerance)
                        .await?;
                }
                last_eff = eff;
                since = Instant::now();
            }
            if phase_of(&e).is_some_and(|p| p.is_terminal()) {
                if phase_of(&e) == Some(Phase::RolledBack) {
                    let decided = s
                        .decision
                        .as_ref()
                        .map(|d| name_of(&d.at))
                        .unwrap_or_default();
                    let cond = s
                        .conditions
                        .iter()
                        .find(|c| c.type_ == "RolledBack")
                        .map(|c| name_of(&c.last_transition_time))
                        .unwrap_or_default();
                    self.log(format!(
                        "{name}: detection-to-rollback: decision at {decided}, RolledBack condition at {cond}"
                    ));
                }
                return Ok(e);
            }
        }
    }

    /// Prints the share of requests the candidate's pods answered over the last `window` s
    /// while `state` (phase:planned/effective) was in force; with a tolerance, a Progressing
    /// window must match the effective weight.
    async fn check_split(&self, name: &str, state: &str, window: u64, tol: Option<i64>) -> Result {
        // Prometheus scrapes every 5 s: a shorter window holds at most one sample per pod and
        // its "split" would be noise (a 6 s rollback window once printed 0%).
        if window < 10 {
            self.log(format!(
                "{name}: split {state} (phase:planned/effective) -> not measured, only {window} s in force"
            ));
            return Ok(());
        }
        let asserted = tol.is_some() && state.starts_with("Progressing:");
        let observed = match self.prom.observed_split(&self.ns, window).await {
            Ok(o) => o,
            // Prometheus may be down on purpose (prometheus_down); only an asserted split fails.
            Err(e) if !asserted => {
                self.log(format!("{name}: split {state}: Prometheus: {e:#}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let shown = observed
            .map(|o| format!("{o}%"))
            .unwrap_or_else(|| "-".into());
        self.log(format!(
            "{name}: split {state} (phase:planned/effective) -> observed {shown} over {window} s"
        ));
        match (tol, observed) {
            (Some(tol), Some(_)) if asserted => {
                let effective: i64 = state
                    .rsplit('/')
                    .next()
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(-1);
                split_within(
                    observed,
                    effective,
                    tol,
                    &format!("{name}: the effective weight"),
                )
            }
            _ => Ok(()),
        }
    }
}
