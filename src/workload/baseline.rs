//! Reading a server config back from the target's pod template.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::command::{self, Setting};
use super::env::{resolve_env, ConfigMaps, EnvValue};
use super::names::{
    ENV_DB_POOL, ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS, ENV_RAILS_MAX_THREADS, ENV_SERVER,
    ENV_WEB_CONCURRENCY,
};
use super::render::{app_container, render_server};
use super::WorkloadError;
use crate::api::{parse_quantity, RenderedServer, ServerConfig, ServerKind};

/// Variables the read-back looks at.
pub const SERVER_VARS: [&str; 6] = [
    ENV_WEB_CONCURRENCY,
    ENV_RAILS_MAX_THREADS,
    ENV_PUMA_MAX_THREADS,
    ENV_PUMA_MIN_THREADS,
    ENV_SERVER,
    ENV_DB_POOL,
];

/// The server config the target runs now: the baseline.
///
/// The server is Falcon when the command or args name it, Puma when they name Puma, else
/// whatever `SERVER` says, else Puma. Counts come from the command line first (`puma -w N -t
/// MIN:MAX`, `falcon serve --count N`, also inside `sh -c "…"`), as the server's flags
/// override its environment; then from `NAME=value` assignments in front of the server; then
/// from the container's environment — `env`, `envFrom` and `configMapKeyRef`, with
/// `config_maps` holding the data of the ConfigMaps it references
/// ([`referenced_config_maps`]). Secrets are never read: what only a Secret could tell is
/// listed in `unresolved`. `minThreads` is only reported when it differs from `threads`,
/// mirroring the spec's default.
pub fn read_baseline(
    target: &Deployment,
    container: Option<&str>,
    config_maps: &ConfigMaps,
) -> Result<RenderedServer, WorkloadError> {
    let c = app_container(target, container)?;
    let mut env = resolve_env(c, &SERVER_VARS, config_maps);
    let names = |server: &str| {
        c.command
            .iter()
            .chain(c.args.iter())
            .flatten()
            .any(|w| w.contains(server))
    };
    let server = if names("falcon") {
        ServerKind::Falcon
    } else if names("puma") {
        ServerKind::Puma
    } else {
        match env
            .get(ENV_SERVER)
            .and_then(|v| v.value.as_deref())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("falcon") => ServerKind::Falcon,
            _ => ServerKind::Puma,
        }
    };
    let line = command::parse(c.command.as_deref(), c.args.as_deref(), server);
    // `WEB_CONCURRENCY=2 bundle exec puma`: the server process sees these, not the container's.
    for occ in &line.occurrences {
        if let (Setting::Var(name), Some(value)) = (occ.setting, &occ.value) {
            env.insert(name, EnvValue::known(value.clone()));
        }
    }
    let mut unresolved: Vec<String> = line
        .unreadable
        .iter()
        .map(|u| {
            format!(
                "{}[{}]: the shell string cannot be read ({}); flags in it are not seen",
                u.field.name(),
                u.index,
                u.reason
            )
        })
        .collect();
    // A flag's value as the server gets it: the kubelet expands `$(NAME)` from the env.
    let mut flag = |setting: Setting, what: &str| -> Option<Option<String>> {
        let occ = line.last(setting)?;
        let value = occ.value.as_deref().map(|v| match expansion_of(v) {
            Some(name) => env.get(name).and_then(|e| e.value.clone()),
            None => Some(v.to_string()),
        });
        let value = value.flatten();
        if value
            .as_deref()
            .and_then(|v| parse_count(v.rsplit(':').next().unwrap_or(v)))
            .is_none()
        {
            unresolved.push(format!(
                "{what}: unknown (`{}` in {}[{}])",
                occ.written,
                occ.field.name(),
                occ.index
            ));
        }
        Some(value)
    };
    let workers_flag = flag(Setting::Workers, "workers");
    let threads_flag = match server {
        ServerKind::Puma => flag(Setting::Threads, "threads"),
        _ => None,
    };
    // The first of `names` that is set decides; `note_possible`: also say so when it only
    // might be set by a source the operator cannot read.
    let mut from_env = |names: &[&str], note_possible: bool| -> Option<i32> {
        for name in names {
            match env.get(name) {
                Some(EnvValue { value: Some(v), .. }) => return parse_count(v),
                Some(EnvValue {
                    unknown: Some(why),
                    possibly,
                    ..
                }) => {
                    if note_possible || !possibly {
                        unresolved.push(format!("{name}: {why}"));
                    }
                    return None;
                }
                _ => {}
            }
        }
        None
    };
    let workers = match workers_flag {
        Some(v) => v.as_deref().and_then(parse_count),
        None => from_env(&[ENV_WEB_CONCURRENCY], true),
    };
    let (threads, min_threads) = if server == ServerKind::Puma {
        let (min, max) = match threads_flag {
            // Puma reads `-t 6` as 6:6.
            Some(v) => {
                let v = v.unwrap_or_default();
                match v.split_once(':') {
                    Some((min, max)) => (parse_count(min), parse_count(max)),
                    None => (parse_count(&v), parse_count(&v)),
                }
            }
            None => {
                let max = from_env(&[ENV_RAILS_MAX_THREADS, ENV_PUMA_MAX_THREADS], true);
                // Minimum threads default to the maximum: a maybe is not worth a note.
                (from_env(&[ENV_PUMA_MIN_THREADS], false), max)
            }
        };
        (max, min.filter(|m| Some(*m) != max))
    } else {
        (None, None)
    };
    // The pool as the environment sizes it; a maybe (envFrom a Secret) is not worth a note.
    let db_pool = from_env(&[ENV_DB_POOL], false).or_else(|| {
        from_env(&[ENV_RAILS_MAX_THREADS], false)
            .filter(|p| server != ServerKind::Puma || Some(*p) != threads)
    });
    // RAILS_MAX_THREADS may be unreadable for the threads and the pool alike: one note.
    let mut seen = BTreeSet::new();
    unresolved.retain(|u| seen.insert(u.clone()));
    Ok(RenderedServer {
        server,
        workers,
        threads,
        min_threads,
        db_pool,
        command: c.command.clone(),
        args: c.args.clone(),
        unresolved,
    })
}

/// `$(NAME)` → `NAME`.
fn expansion_of(value: &str) -> Option<&str> {
    value.strip_prefix("$(")?.strip_suffix(')')
}

fn parse_count(v: &str) -> Option<i32> {
    v.trim().parse().ok()
}

/// Does the target's app container already carry `config`? True once a promotion has been
/// written (rendering is idempotent, so rendering again changes nothing). Resources are
/// compared by value because the API server rewrites quantities (`1024Mi` comes back `1Gi`).
pub fn runs_config(target: &Deployment, config: &ServerConfig, container: Option<&str>) -> bool {
    let Ok(current) = app_container(target, container) else {
        return false;
    };
    let mut rendered = current.clone();
    if render_server(&mut rendered, config).is_err() {
        return false;
    }
    rendered.env == current.env
        && rendered.command == current.command
        && rendered.args == current.args
        && same_resources(rendered.resources.as_ref(), current.resources.as_ref())
}

fn same_resources(a: Option<&ResourceRequirements>, b: Option<&ResourceRequirements>) -> bool {
    let empty = ResourceRequirements::default();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    same_quantities(a.limits.as_ref(), b.limits.as_ref())
        && same_quantities(a.requests.as_ref(), b.requests.as_ref())
        && a.claims == b.claims
}

fn same_quantities(
    a: Option<&BTreeMap<String, Quantity>>,
    b: Option<&BTreeMap<String, Quantity>>,
) -> bool {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len()
        && a.iter().all(|(k, qa)| {
            b.get(k)
                .is_some_and(|qb| match (parse_quantity(&qa.0), parse_quantity(&qb.0)) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
                    _ => qa.0 == qb.0,
                })
        })
}
