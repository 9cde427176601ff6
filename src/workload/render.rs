//! Rendering a server config into the app container: env, command, args, resources.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar};
use kube::ResourceExt;

use super::names::{
    ENV_DB_POOL, ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS, ENV_RAILS_MAX_THREADS, ENV_SERVER,
    ENV_WEB_CONCURRENCY,
};
use super::{command, WorkloadError};
use crate::api::{FalconMode, ServerConfig, ServerKind};

/// Variables that only mean something to Puma. `RAILS_MAX_THREADS` is not among them: Rails'
/// default `database.yml` sizes the DB pool from it whatever the server.
const PUMA_VARS: [&str; 2] = [ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS];
/// Port for Falcon's default bind when the container declares none (Rails' default).
const DEFAULT_PORT: i32 = 3000;

/// Index of the app container in the target's pod template: the one named, else the first.
pub fn app_container_index(
    target: &Deployment,
    name: Option<&str>,
) -> Result<usize, WorkloadError> {
    let containers = containers(target);
    if containers.is_empty() {
        return Err(WorkloadError::NoContainers {
            deployment: target.name_any(),
        });
    }
    match name {
        None => Ok(0),
        Some(name) => containers
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| WorkloadError::ContainerNotFound {
                name: name.to_string(),
                deployment: target.name_any(),
                containers: containers.iter().map(|c| c.name.clone()).collect(),
            }),
    }
}

/// The app container of the target (see [`app_container_index`]).
pub fn app_container<'a>(
    target: &'a Deployment,
    name: Option<&str>,
) -> Result<&'a Container, WorkloadError> {
    let index = app_container_index(target, name)?;
    // In range: the index was found in this same list.
    Ok(&containers(target)[index])
}

fn containers(target: &Deployment) -> &[Container] {
    target
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.as_slice())
        .unwrap_or_default()
}

/// Writes `config` into `container`. Idempotent: rendering twice gives the same container,
/// which is how [`super::runs_config`] recognises a promoted target.
///
/// Env entries are literal values in place of whatever set them before (a `valueFrom` is
/// replaced, not duplicated) and override `envFrom`, as Kubernetes gives `env` precedence.
/// Server flags on the command line (`puma -w 2 -t 6:6`, also inside `sh -c "…"`) would
/// override that env, so they are rewritten to the candidate's counts; a form that cannot be
/// rewritten safely is an error naming it, never a candidate running the baseline's config.
pub fn render_server(
    container: &mut Container,
    config: &ServerConfig,
) -> Result<(), WorkloadError> {
    let mut env = container.env.take().unwrap_or_default();
    match config.server {
        ServerKind::Puma => {
            if let Some(workers) = config.workers {
                set_env(&mut env, ENV_WEB_CONCURRENCY, workers);
            }
            if let Some(threads) = config.threads {
                set_env(&mut env, ENV_RAILS_MAX_THREADS, threads);
                set_env(&mut env, ENV_PUMA_MAX_THREADS, threads);
            }
            if let Some(min) = config.min_threads.or(config.threads) {
                set_env(&mut env, ENV_PUMA_MIN_THREADS, min);
            }
            // A command that starts Falcon would ignore all of the above.
            drop_command_naming(container, "falcon");
        }
        ServerKind::Falcon => {
            if let Some(workers) = config.workers {
                set_env(&mut env, ENV_WEB_CONCURRENCY, workers);
            }
            // Falcon runs one fiber per request: Puma's thread counts would only mislead.
            // RAILS_MAX_THREADS stays (the baseline's pool) unless dbPool sets it: dropping it
            // would shrink a default database.yml's pool to 5 (seed 004's
            // ConnectionTimeoutError), and promotion would write that into the target.
            env.retain(|v| !PUMA_VARS.contains(&v.name.as_str()));
            if let Some(pool) = config.db_pool {
                set_env(&mut env, ENV_RAILS_MAX_THREADS, pool);
            }
            match config.falcon.as_ref().map(|f| f.mode) {
                Some(FalconMode::Host) => {
                    // No `falcon.config`: the file the target's own `falcon host` reads, if it
                    // runs one (the operator cannot look inside the image for config/falcon.rb).
                    let file = config
                        .falcon
                        .as_ref()
                        .and_then(|f| f.config.clone())
                        .or_else(|| falcon_host_file(container));
                    let mut cmd: Vec<String> = ["falcon", "host"].map(String::from).to_vec();
                    cmd.extend(file);
                    set_command(container, cmd)
                }
                Some(FalconMode::Serve) => {
                    let bind = config
                        .falcon
                        .as_ref()
                        .and_then(|f| f.bind.clone())
                        .unwrap_or_else(|| format!("http://0.0.0.0:{}", first_port(container)));
                    let mut command = vec!["falcon".to_string(), "serve".to_string()];
                    if let Some(workers) = config.workers {
                        command.extend(["--count".to_string(), workers.to_string()]);
                    }
                    command.extend(["--bind".to_string(), bind]);
                    set_command(container, command);
                }
                None => drop_command_naming(container, "puma"),
            }
        }
        ServerKind::Custom => {}
    }
    if let Some(pool) = config.db_pool {
        set_env(&mut env, ENV_DB_POOL, pool);
    }
    if config.server != ServerKind::Custom && env.iter().any(|v| v.name == ENV_SERVER) {
        set_env(&mut env, ENV_SERVER, config.server);
    }
    if let Some(command) = &config.command {
        container.command = Some(command.clone());
    }
    if let Some(args) = &config.args {
        container.args = Some(args.clone());
    }
    for var in &config.env {
        upsert_env(&mut env, var.clone());
    }
    container.env = (!env.is_empty()).then_some(env);
    if let Some(resources) = &config.resources {
        container.resources = Some(resources.clone());
    }
    let from_spec = (config.command.is_some(), config.args.is_some());
    command::rewrite(
        &container.name,
        &mut container.command,
        &mut container.args,
        config,
        from_spec,
    )
}

/// Sets `name` to `value`, in place if present (first occurrence, later duplicates removed),
/// else appended — order matters for `$(VAR)` references.
fn set_env(env: &mut Vec<EnvVar>, name: &str, value: impl ToString) {
    upsert_env(
        env,
        EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        },
    );
}

fn upsert_env(env: &mut Vec<EnvVar>, var: EnvVar) {
    match env.iter().position(|v| v.name == var.name) {
        Some(first) => {
            let mut index = 0;
            env.retain(|v| {
                let keep = index <= first || v.name != var.name;
                index += 1;
                keep
            });
            env[first] = var;
        }
        None => env.push(var),
    }
}

/// The command replaces the image's entrypoint; args from the old command would be wrong.
fn set_command(container: &mut Container, command: Vec<String>) {
    container.command = Some(command);
    container.args = None;
}

/// Falls back to the image's own entrypoint when the command or args start the other server.
fn drop_command_naming(container: &mut Container, server: &str) {
    let names = |v: &Option<Vec<String>>| v.iter().flatten().any(|s| s.contains(server));
    if names(&container.command) || names(&container.args) {
        container.command = None;
        container.args = None;
    }
}

fn first_port(container: &Container) -> i32 {
    container
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .map(|p| p.container_port)
        .unwrap_or(DEFAULT_PORT)
}

/// The file a container's `falcon host FILE` reads (`bundle exec` and a path to the binary
/// allowed): its command and args as one word list, the word after `host` unless a flag.
fn falcon_host_file(container: &Container) -> Option<String> {
    let words: Vec<&String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .collect();
    let at = words
        .windows(2)
        .position(|w| w[0].rsplit('/').next() == Some("falcon") && w[1] == "host")?;
    words
        .get(at + 2)
        .filter(|f| !f.starts_with('-'))
        .map(|f| f.to_string())
}
