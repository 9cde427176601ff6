//! `init DEPLOYMENT --threads N | --server falcon --workers W`: a starter experiment.
//!
//! The target's current config is read back (as a comment, so the reader sees baseline and
//! candidate side by side). With `--prometheus` every starter check's query — exactly the one
//! the operator will run — is tried against the target's pods; a check without data would
//! keep every analysis Inconclusive and roll the experiment back, so it is written commented
//! out with the reason.

use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;

use super::cli::{InitArgs, InitServer};
use super::recommend::{measure, sizing_note, Target};
use super::{PluginError, Session};
use crate::analysis::{check_template, pods_regex, render, TemplateVars};
use crate::api::{Analysis, Check, MetricPreset, RenderedServer, ServerConfig, ServerKind};
use crate::prometheus::PrometheusClient;
use crate::workload::{app_container, read_baseline};

/// Where the starter points when no `--prometheus` is given (the examples' address).
pub const PLACEHOLDER_PROMETHEUS: &str = "http://prometheus.monitoring:9090";

/// The probe's range: wider than the 1m interval, so a quiet minute does not drop a check.
const PROBE_WINDOW: Duration = Duration::from_secs(300);

/// One starter check: its YAML (a flow mapping, as the examples write them) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Starter {
    pub yaml: &'static str,
    pub why: &'static str,
    /// Only with data proven by a probe (it needs something most setups lack).
    pub needs_probe: bool,
}

/// The starter checks for `candidate`: latency, memory, GVL wait (threaded candidates),
/// errors, queue time.
pub fn starters(candidate: &ServerConfig) -> Vec<Starter> {
    let mut s = vec![
        Starter {
            yaml: r#"{metric: latency, quantile: 0.99, maxIncrease: "10%"}"#,
            why: "p99 request duration at most 10% above the baseline's in the same interval",
            needs_probe: false,
        },
        Starter {
            yaml: r#"{metric: memory, maxIncrease: "20%"}"#,
            why: "working set per pod at most 20% above the baseline's (memory grows with workers and threads)",
            needs_probe: false,
        },
    ];
    if candidate.server == ServerKind::Puma {
        s.push(Starter {
            yaml: r#"{metric: gvlWait, max: "15%"}"#,
            why: "share of request time spent waiting for the GVL: too many threads per process",
            needs_probe: false,
        });
    }
    s.push(Starter {
        yaml: r#"{metric: errorRate, max: "1%"}"#,
        why: "share of 5xx responses",
        needs_probe: false,
    });
    s.push(Starter {
        yaml: r#"{metric: queueTime, quantile: 0.9, max: 50ms, maxIncrease: "50%"}"#,
        why: "time requests wait for a free thread; needs X-Request-Start from the load balancer",
        needs_probe: true,
    });
    s
}

pub fn check_of(starter: &Starter) -> Result<Check, PluginError> {
    serde_yaml::from_str(starter.yaml)
        .map_err(|e| PluginError::Usage(format!("starter check {}: {e}", starter.yaml)))
}

/// The candidate from the flags; Puma keeps the target's workers unless `--workers` is given.
pub fn candidate(args: &InitArgs, baseline: &RenderedServer) -> Result<ServerConfig, PluginError> {
    let config = match args.server {
        InitServer::Puma => {
            let threads = args.threads.ok_or_else(|| {
                PluginError::Usage("--threads N is needed for a puma candidate".into())
            })?;
            let workers = args.workers.or(match baseline.server {
                ServerKind::Puma => baseline.workers,
                _ => None,
            });
            ServerConfig {
                server: ServerKind::Puma,
                workers,
                threads: Some(threads),
                ..ServerConfig::default()
            }
        }
        InitServer::Falcon => {
            if args.threads.is_some() {
                return Err(PluginError::Usage(
                    "--threads is for puma only: Falcon runs one fiber per request".into(),
                ));
            }
            ServerConfig {
                server: ServerKind::Falcon,
                workers: args.workers,
                ..ServerConfig::default()
            }
        }
    };
    let same = config.server == baseline.server
        && config.workers == baseline.workers
        && config.threads == baseline.threads
        && baseline.min_threads.is_none();
    if same {
        return Err(PluginError::Usage(format!(
            "the target already runs {}: choose another config",
            baseline.summary()
        )));
    }
    Ok(config)
}

/// `storefront-puma-2x4`, `storefront-puma-4-threads`, `storefront-falcon-2`.
pub fn default_name(deployment: &str, c: &ServerConfig) -> String {
    let slug = match (c.server, c.workers, c.threads) {
        (ServerKind::Puma, Some(w), Some(t)) => format!("puma-{w}x{t}"),
        (ServerKind::Puma, None, Some(t)) => format!("puma-{t}-threads"),
        (server, Some(w), _) => format!("{server}-{w}"),
        (server, None, _) => server.to_string(),
    };
    // An object name is at most 253 characters; the slug is what tells experiments apart.
    let keep = 253usize.saturating_sub(slug.len() + 1);
    let base: String = deployment.chars().take(keep).collect();
    format!("{}-{slug}", base.trim_end_matches(['-', '.']))
}

/// Everything the manifest is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct Starting {
    pub name: String,
    pub namespace: String,
    pub deployment: String,
    pub container: String,
    pub baseline: RenderedServer,
    pub candidate: ServerConfig,
    pub prometheus: Option<String>,
    /// `--preset`: written as `spec.analysis.metrics.preset` and used by the probe.
    pub preset: Option<MetricPreset>,
    /// Per starter check (by position): whether its query had data; `None` when not probed.
    pub data: Option<Vec<bool>>,
    /// With `--prometheus`: the measured I/O share and Amdahl's thread count, as comments
    /// (`recommend::sizing_note`).
    pub sizing: Option<String>,
}

/// A JSON string is a valid YAML double-quoted scalar: user text can never break the YAML.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn read_back(b: &RenderedServer) -> String {
    let mut s = b.summary();
    let words = |v: &Option<Vec<String>>| v.as_ref().map(|w| w.join(" "));
    if let Some(c) = words(&b.command) {
        s.push_str(&format!("; command: {c}"));
    }
    if let Some(a) = words(&b.args) {
        s.push_str(&format!("; args: {a}"));
    }
    if let Some(m) = b.min_threads {
        s.push_str(&format!("; min threads {m}"));
    }
    s
}

pub fn manifest(s: &Starting) -> String {
    let c = &s.candidate;
    let mut out = format!(
        "# Starter ConcurrencyExperiment for Deployment {} in namespace {}.\n\
         # The target runs now (read back from container {}): {}\n\
         # Candidate: {}. Review stages and checks, then: kubectl apply -f FILE\n",
        s.deployment,
        s.namespace,
        s.container,
        read_back(&s.baseline),
        c.summary()
    );
    if let Some(note) = &s.sizing {
        out.push_str(note);
    }
    let starters = starters(c);
    let probed = s.data.as_deref();
    let any_data = probed.is_some_and(|d| d.iter().any(|&x| x));
    if probed.is_some() && !any_data {
        out.push_str(
            "# WARNING: no check had data in Prometheus for the target's pods in the last 5m;\n\
             # check the URL, the exporter's metric names and that the pods serve traffic.\n",
        );
    }
    out.push_str("apiVersion: concurrency.dev/v1alpha1\nkind: ConcurrencyExperiment\n");
    out.push_str(&format!(
        "metadata:\n  name: {}\n  namespace: {}\n",
        quoted(&s.name),
        quoted(&s.namespace)
    ));
    out.push_str(&format!(
        "spec:\n  targetRef:\n    name: {}\n  container: {}\n  candidate:\n    server: {}\n",
        quoted(&s.deployment),
        quoted(&s.container),
        c.server
    ));
    if let Some(w) = c.workers {
        out.push_str(&format!("    workers: {w}\n"));
    }
    if let Some(t) = c.threads {
        out.push_str(&format!("    threads: {t}\n"));
    }
    if c.server == ServerKind::Falcon {
        out.push_str(
            "    # falcon: {mode: host} sets the command `falcon host` (or {mode: serve}); without\n    \
             # it the image's own command runs and must start Falcon.\n",
        );
    }
    out.push_str(
        "  traffic:\n    router: replicas   # candidate pods join the target's Service; or gatewayAPI + httpRoute\n",
    );
    out.push_str(
        "  stages:\n    - {weight: 30, duration: 10m}\n    - {weight: 70, duration: 10m}\n    - {weight: 100, duration: 10m}\n",
    );
    let url = match &s.prometheus {
        Some(u) => quoted(u),
        None => format!(
            "{}   # placeholder: your Prometheus (or pass --prometheus)",
            quoted(PLACEHOLDER_PROMETHEUS)
        ),
    };
    out.push_str(&format!(
        "  analysis:\n    prometheus:\n      url: {url}\n    interval: 1m\n    failureLimit: 1\n    \
         inconclusiveLimit: 3\n    minRequests: 50\n"
    ));
    if let Some(p) = s.preset {
        out.push_str(&format!("    metrics: {{preset: {}}}\n", p.name()));
    }
    out.push_str("    checks:\n");
    for (i, st) in starters.iter().enumerate() {
        let has = probed.and_then(|d| d.get(i).copied());
        let enabled = match has {
            Some(h) => h || (!any_data && !st.needs_probe),
            None => !st.needs_probe,
        };
        out.push_str(&format!("      # {}\n", st.why));
        if enabled {
            out.push_str(&format!("      - {}\n", st.yaml));
        } else {
            let why = match has {
                Some(_) => "no data in Prometheus for the target's pods",
                None => "enable once your app exports it (pass --prometheus to check)",
            };
            out.push_str(&format!("      # - {}   # {why}\n", st.yaml));
        }
    }
    out.push_str("  promotion: auto   # or manual: hold at the last stage until `kubectl concurrency approve`\n");
    out
}

/// Whether each starter check's query (as the operator renders it for the baseline) returns a
/// value for the target's pods now.
pub async fn probe(
    client: &PrometheusClient,
    analysis: &Analysis,
    starters: &[Starter],
    vars: &TemplateVars,
    at: Timestamp,
) -> Result<Vec<bool>, PluginError> {
    let mut queries = Vec::new();
    for st in starters {
        let check = check_of(st)?;
        let template = check_template(&check, &analysis.metrics.resolve())
            .map_err(|e| PluginError::Usage(e.to_string()))?;
        let q = render(&check.display_name(), &template, vars)
            .map_err(|e| PluginError::Usage(e.to_string()))?;
        queries.push(q);
    }
    let answers =
        futures::future::join_all(queries.iter().map(|q| client.query_value(q, at))).await;
    answers
        .into_iter()
        .map(|a| Ok(a?.is_some_and(f64::is_finite)))
        .collect()
}

pub async fn run(
    session: &Session,
    args: &InitArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let deployment = session.deployment(&args.deployment).await?;
    let container = app_container(&deployment, args.container.as_deref())?
        .name
        .clone();
    let baseline = read_baseline(&deployment, Some(&container), &Default::default())?;
    let candidate = candidate(args, &baseline)?;
    let (data, sizing) = match &args.prometheus {
        None => (None, None),
        Some(url) => {
            let provider = args.access.provider(url).map_err(PluginError::Usage)?;
            let client =
                PrometheusClient::for_provider(&provider, crate::prometheus::DEFAULT_TIMEOUT)?;
            // The metric names the starter's spec will have: the preset's, or the defaults.
            let metrics = match args.preset {
                Some(p) => serde_json::json!({"preset": p.name()}),
                None => serde_json::json!({}),
            };
            let analysis: Analysis = serde_json::from_value(serde_json::json!({
                "prometheus": {"url": url}, "metrics": metrics,
                "checks": [{"metric": "latency", "maxIncrease": "10%"}],
            }))
            .map_err(|e| PluginError::Usage(e.to_string()))?;
            let vars = TemplateVars {
                namespace: session.namespace.clone(),
                pods: pods_regex(&args.deployment),
                interval: PROBE_WINDOW,
                container: container.clone(),
            };
            let starters = starters(&candidate);
            let now = Timestamp::now();
            let data = probe(&client, &analysis, &starters, &vars, now).await?;
            // The thread count the measured I/O share suggests (the standard metrics' where
            // the GVL counters have none), beside the candidate the flags chose.
            let mut target = Target::from_deployment(&deployment, Some(&container))?;
            target.namespace = session.namespace.clone();
            let queries =
                super::recommend::queries(&target, &analysis.metrics.resolve(), PROBE_WINDOW)?;
            let m = measure(&client, &queries, now).await?;
            (Some(data), sizing_note(&m, PROBE_WINDOW))
        }
    };
    let starting = Starting {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| default_name(&args.deployment, &candidate)),
        namespace: session.namespace.clone(),
        deployment: args.deployment.clone(),
        container,
        baseline,
        candidate,
        prometheus: args.prometheus.clone(),
        preset: args.preset,
        data,
        sizing,
    };
    out.write_all(manifest(&starting).as_bytes())?;
    Ok(())
}
