//! The starter manifest, written without I/O: the starter checks for a candidate, the
//! candidate from the flags, and the YAML with the baseline read back beside it and each
//! check's pre-flight finding.

use super::super::cli::{InitArgs, InitServer};
use super::super::PluginError;
use crate::analysis::preflight::Finding;
use crate::api::{Analysis, Check, MetricPreset, RenderedServer, ServerConfig, ServerKind, Stage};

/// The starter's stages (weight, duration), interval and `minRequests`, as written.
pub const STAGES: [(i32, &str); 3] = [(30, "10m"), (70, "10m"), (100, "10m")];
pub const INTERVAL: &str = "1m";
pub const MIN_REQUESTS: i64 = 50;

/// The starter's stages as the spec reads them.
pub fn starter_stages() -> Vec<Stage> {
    STAGES
        .iter()
        .map(|(weight, duration)| Stage {
            weight: *weight,
            duration: (*duration).to_string(),
        })
        .collect()
}

/// Where the starter points when no `--prometheus` is given (the examples' address).
pub const PLACEHOLDER_PROMETHEUS: &str = "http://prometheus.monitoring:9090";

/// One starter check: its YAML (a flow mapping, as the examples write them) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Starter {
    pub yaml: &'static str,
    pub why: &'static str,
    /// Why it is written commented out when not looked up (it needs something most apps
    /// lack); `None`: written (a yabeda-rails app on Kubernetes has its series).
    pub unprobed: Option<&'static str>,
}

/// The starter checks for `candidate`: latency, memory, errors; for Puma also GVL wait and
/// backlog; queue time.
pub fn starters(candidate: &ServerConfig) -> Vec<Starter> {
    let puma = candidate.server == ServerKind::Puma;
    let mut s = vec![
        Starter {
            yaml: r#"{metric: latency, quantile: 0.99, maxIncrease: "10%"}"#,
            why: "p99 request duration at most 10% above the baseline's, over the stage's requests so far",
            unprobed: None,
        },
        Starter {
            yaml: r#"{metric: memory, maxIncrease: "20%"}"#,
            why: "working set per pod at most 20% above the baseline's (memory grows with workers and threads)",
            unprobed: None,
        },
        Starter {
            yaml: r#"{metric: errorRate, max: "1%"}"#,
            why: "share of 5xx responses",
            unprobed: None,
        },
    ];
    if puma {
        s.push(Starter {
            yaml: r#"{metric: gvlWait, max: "15%"}"#,
            why: "share of request time spent waiting for the GVL: too many threads per process",
            unprobed: Some(
                "needs the GVL counters of this repository's concurrency-metrics gem (no \
                 published gem writes them); pass --prometheus to check",
            ),
        });
        s.push(Starter {
            yaml: r#"{metric: backlog, max: 5}"#,
            why: "requests waiting for a free Puma thread (Puma's own stats, no header needed)",
            unprobed: Some(
                "needs yabeda-puma-plugin or prometheus_exporter's Puma collector; pass \
                 --prometheus to check",
            ),
        });
    }
    s.push(Starter {
        yaml: r#"{metric: queueTime, quantile: 0.9, max: 50ms, maxIncrease: "50%"}"#,
        why: "time requests wait for a free thread; needs X-Request-Start from the load balancer",
        unprobed: Some(
            "enable once your load balancer sets X-Request-Start (pass --prometheus to check)",
        ),
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
    /// Per starter check (by position): what the series lookup found; `None` when not probed.
    pub data: Option<Vec<Finding>>,
    /// The capacity gate's series were looked up and never existed (the sentence says why):
    /// the starter turns the gate off rather than be refused.
    pub gate_off: Option<String>,
    /// With `--prometheus`: the measured I/O share and Amdahl's thread count, as comments
    /// (`recommend::sizing_note`).
    pub sizing: Option<String>,
    /// With `--prometheus`: how the stages fall short of the data the checks need at the
    /// target's measured request rate (`analysis::reach::notes`), as comments.
    pub reach: Vec<String>,
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
    let any_data = probed.is_some_and(|d| d.contains(&Finding::Found));
    if probed.is_some() && !any_data {
        out.push_str(
            "# WARNING: no check's series were found in Prometheus for the target's pods;\n\
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
    for note in &s.reach {
        out.push_str(&format!("  # WARNING: {}\n", note.replace('\n', " ")));
    }
    out.push_str("  stages:\n");
    for (weight, duration) in STAGES {
        out.push_str(&format!(
            "    - {{weight: {weight}, duration: {duration}}}\n"
        ));
    }
    let url = match &s.prometheus {
        Some(u) => quoted(u),
        None => format!(
            "{}   # placeholder: your Prometheus (or pass --prometheus)",
            quoted(PLACEHOLDER_PROMETHEUS)
        ),
    };
    out.push_str(&format!(
        "  analysis:\n    prometheus:\n      url: {url}\n    interval: {INTERVAL}\n    \
         judge: sequential   # latency, queueTime, errorRate: anytime-valid tests on all of the stage's requests (docs/judge.md)\n    \
         failureLimit: 1\n    inconclusiveLimit: 3\n    minRequests: {MIN_REQUESTS}\n"
    ));
    if let Some(why) = &s.gate_off {
        out.push_str(&format!(
            "    # {}\n    maxPredictedUtilization: \"off\"\n",
            why.replace('\n', " ")
        ));
    }
    if let Some(p) = s.preset {
        out.push_str(&format!("    metrics: {{preset: {}}}\n", p.name()));
    }
    out.push_str("    checks:\n");
    for (i, st) in starters.iter().enumerate() {
        let found = probed.and_then(|d| d.get(i));
        let off = match found {
            Some(Finding::Found) => None,
            // Nothing found at all: the URL or the names are off, not every check.
            Some(_) if !any_data && st.unprobed.is_none() => None,
            Some(Finding::Missing(_)) => {
                Some("its series were not found for the target's pods (see stderr)")
            }
            Some(Finding::Unknown(_)) => {
                Some("cannot tell yet whether its series exist (see stderr)")
            }
            None => st.unprobed,
        };
        out.push_str(&format!("      # {}\n", st.why));
        match off {
            None => out.push_str(&format!("      - {}\n", st.yaml)),
            Some(why) => out.push_str(&format!("      # - {}   # {why}\n", st.yaml)),
        }
    }
    out.push_str("  promotion: auto   # or manual: hold at the last stage until `kubectl concurrency approve`\n");
    out
}

/// The starter's analysis (`metrics`, as the manifest will have them) with every starter check.
pub fn starter_analysis(
    url: &str,
    preset: Option<MetricPreset>,
    starters: &[Starter],
) -> Result<Analysis, PluginError> {
    let metrics = match preset {
        Some(p) => serde_json::json!({"preset": p.name()}),
        None => serde_json::json!({}),
    };
    let checks = starters
        .iter()
        .map(check_of)
        .collect::<Result<Vec<Check>, _>>()?;
    serde_json::from_value(serde_json::json!({
        "prometheus": {"url": url}, "metrics": metrics, "interval": INTERVAL,
        "judge": "sequential", "minRequests": MIN_REQUESTS, "checks": checks,
    }))
    .map_err(|e| PluginError::Usage(e.to_string()))
}
