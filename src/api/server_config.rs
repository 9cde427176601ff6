//! The server config: which Ruby server runs and with how much concurrency.

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum ServerKind {
    /// Threaded: `workers` processes × `threads` threads, one GVL per process.
    #[default]
    Puma,
    /// Async: `workers` processes, one fiber per request.
    Falcon,
    /// Anything else: env/args/command given verbatim.
    Custom,
}

impl std::fmt::Display for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerKind::Puma => "puma",
            ServerKind::Falcon => "falcon",
            ServerKind::Custom => "custom",
        })
    }
}

/// How Falcon is started when the operator should set the command (omit to keep the image's).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FalconMode {
    /// `falcon host` — reads `falcon.rb`, which reads `WEB_CONCURRENCY`.
    Host,
    /// `falcon serve --count N --bind URL`.
    Serve,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.config) || self.mode == 'host'").message("config is the file falcon host reads; serve takes none").field_path(".config").reason(kube::core::Reason::FieldValueForbidden)
)]
pub struct FalconOptions {
    pub mode: FalconMode,
    /// Bind URL for `serve`; default `http://0.0.0.0:$(PORT)` with the container's first port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// The file `falcon host` reads, relative to the working directory: `config/falcon.rb`
    /// where the app keeps it (seed 004, the Ruby reference app). Omitted: Falcon's own
    /// default, `falcon.rb`. The operator cannot look inside the image, so it does not guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_./-]{1,255}$"), length(max = 255))]
    pub config: Option<String>,
}

/// A Ruby server and its concurrency. The same type describes the candidate (from the spec)
/// and the baseline (read back from the target's pod template).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.threads) || self.server == 'puma'").message("threads is only valid for server: puma").field_path(".threads").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.minThreads) || self.server == 'puma'").message("minThreads is only valid for server: puma").field_path(".minThreads").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.minThreads) || !has(self.threads) || self.minThreads <= self.threads").message("minThreads must not exceed threads").field_path(".minThreads"),
    validation = Rule::new("!has(self.falcon) || self.server == 'falcon'").message("falcon options are only valid for server: falcon").field_path(".falcon").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("self.server != 'custom' || has(self.env) || has(self.args) || has(self.command)").message("server: custom needs env, args or command").field_path(".server"),
    validation = Rule::new("!has(self.dbPool) || self.server != 'custom'").message("dbPool is only valid for server: puma or falcon (set the app's own variable in env)").field_path(".dbPool").reason(kube::core::Reason::FieldValueForbidden)
)]
pub struct ServerConfig {
    /// puma, falcon or custom.
    pub server: ServerKind,
    /// Worker processes (`WEB_CONCURRENCY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub workers: Option<i32>,
    /// Threads per Puma worker (`RAILS_MAX_THREADS`, `PUMA_MAX_THREADS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub threads: Option<i32>,
    /// Minimum threads per Puma worker (`PUMA_MIN_THREADS`); default equals `threads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub min_threads: Option<i32>,
    /// ActiveRecord connections per worker process, rendered as `DB_POOL` and, for Falcon, also
    /// as `RAILS_MAX_THREADS` — the variable Rails' default `config/database.yml` sizes its
    /// pool from, which no longer means threads under Falcon. Omitted: Puma's pool follows
    /// `threads` (Rails' default); Falcon keeps the baseline's `RAILS_MAX_THREADS`, so the pool
    /// never silently drops to Rails' default 5. Seed 004's rule for Falcon: peak fibers per
    /// worker × 0.6 (docs/experiment-reference.md, "DB pool").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub db_pool: Option<i32>,
    /// Falcon start command; omit to keep the image's own command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub falcon: Option<FalconOptions>,
    /// Extra environment, set after the rendered variables (so it can override them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Container command, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Container args, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Resources for this variant's container (memory grows with workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl ServerConfig {
    /// One line for people: `puma 2×6`, `falcon 2 workers`, `custom`.
    pub fn summary(&self) -> String {
        RenderedServer::from(self).summary()
    }
}

/// A server config as it stands in a pod template. Unlike the spec's `ServerConfig` it carries
/// no schema rules, so whatever the user's Deployment holds can be shown.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RenderedServer {
    pub server: ServerKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_threads: Option<i32>,
    /// ActiveRecord connections per worker where they are not one per Puma thread: `DB_POOL`,
    /// else `RAILS_MAX_THREADS` (what Rails' default `database.yml` reads) for Falcon, or for
    /// Puma when it differs from the thread count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// What the read-back could not see, e.g. `WEB_CONCURRENCY: unknown (from Secret app-env
    /// key workers)` — the operator never reads Secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
}

impl From<&ServerConfig> for RenderedServer {
    fn from(c: &ServerConfig) -> Self {
        Self {
            server: c.server,
            workers: c.workers,
            threads: c.threads,
            min_threads: c.min_threads,
            // Only an explicit pool: a status written before dbPool existed must compare equal
            // (an edit restarts the experiment). Without it Puma's pool is `threads`.
            db_pool: c.db_pool,
            command: c.command.clone(),
            args: c.args.clone(),
            unresolved: Vec::new(),
        }
    }
}

impl RenderedServer {
    /// One line for people: `puma 2×6`, `falcon 2 workers, pool 6`, `custom`. Puma's pool is
    /// only shown when it is not one connection per thread.
    pub fn summary(&self) -> String {
        let n = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
        let pool = match (self.server, self.db_pool) {
            (ServerKind::Puma, Some(p)) if Some(p) != self.threads => format!(", pool {p}"),
            (ServerKind::Falcon, Some(p)) => format!(", pool {p}"),
            _ => String::new(),
        };
        match self.server {
            ServerKind::Puma => format!("puma {}×{}{pool}", n(self.workers), n(self.threads)),
            ServerKind::Falcon => format!("falcon {} workers{pool}", n(self.workers)),
            ServerKind::Custom => "custom".into(),
        }
    }
}
