//! Reading a server config back from the target's pod template.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::render::{
    app_container, render_server, ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS,
    ENV_RAILS_MAX_THREADS, ENV_SERVER, ENV_WEB_CONCURRENCY,
};
use super::WorkloadError;
use crate::api::{RenderedServer, ServerConfig, ServerKind};

/// The server config the target runs now: the baseline.
///
/// The server is Falcon when the command or args name it, Puma when they name Puma, else
/// whatever `SERVER` says, else Puma. Counts come from the env the renderer writes, falling
/// back to the command line (`falcon serve --count`, `puma -w N -t MIN:MAX`). `minThreads` is
/// only reported when it differs from `threads`, mirroring the spec's default.
pub fn read_baseline(
    target: &Deployment,
    container: Option<&str>,
) -> Result<RenderedServer, WorkloadError> {
    let c = app_container(target, container)?;
    let words: Vec<&str> = c
        .command
        .iter()
        .chain(c.args.iter())
        .flatten()
        .map(String::as_str)
        .collect();
    let names = |server: &str| words.iter().any(|w| w.contains(server));
    let server = if names("falcon") {
        ServerKind::Falcon
    } else if names("puma") {
        ServerKind::Puma
    } else {
        match env_value(c, ENV_SERVER)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("falcon") => ServerKind::Falcon,
            _ => ServerKind::Puma,
        }
    };
    let (flag_min, flag_max) = flag_value(&words, &["-t", "--threads"])
        .map(|t| match t.split_once(':') {
            Some((min, max)) => (min.parse().ok(), max.parse().ok()),
            None => (None, t.parse().ok()),
        })
        .unwrap_or_default();
    let workers = env_int(c, ENV_WEB_CONCURRENCY).or_else(|| {
        let flags: &[&str] = match server {
            ServerKind::Falcon => &["--count"],
            _ => &["-w", "--workers"],
        };
        flag_value(&words, flags).and_then(|v| v.parse().ok())
    });
    let (threads, min_threads) = if server == ServerKind::Puma {
        let threads = env_int(c, ENV_RAILS_MAX_THREADS)
            .or_else(|| env_int(c, ENV_PUMA_MAX_THREADS))
            .or(flag_max);
        let min = env_int(c, ENV_PUMA_MIN_THREADS).or(flag_min);
        (threads, min.filter(|m| Some(*m) != threads))
    } else {
        (None, None)
    };
    Ok(RenderedServer {
        server,
        workers,
        threads,
        min_threads,
        command: c.command.clone(),
        args: c.args.clone(),
    })
}

/// Does the target's app container already carry `config`? True once a promotion has been
/// written (rendering is idempotent, so rendering again changes nothing). Resources are
/// compared by value because the API server rewrites quantities (`1024Mi` comes back `1Gi`).
pub fn runs_config(target: &Deployment, config: &ServerConfig, container: Option<&str>) -> bool {
    let Ok(current) = app_container(target, container) else {
        return false;
    };
    let mut rendered = current.clone();
    render_server(&mut rendered, config);
    rendered.env == current.env
        && rendered.command == current.command
        && rendered.args == current.args
        && same_resources(rendered.resources.as_ref(), current.resources.as_ref())
}

fn env_value<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .iter()
        .flatten()
        .find(|v| v.name == name)
        .and_then(|v| v.value.as_deref())
}

fn env_int(c: &Container, name: &str) -> Option<i32> {
    env_value(c, name).and_then(|v| v.trim().parse().ok())
}

/// The value after any of `flags`, as `-w 2` or `--workers=2`.
fn flag_value<'a>(words: &[&'a str], flags: &[&str]) -> Option<&'a str> {
    words.iter().enumerate().find_map(|(i, w)| {
        flags.iter().find_map(|f| {
            if w == f {
                words.get(i + 1).copied()
            } else {
                w.strip_prefix(f).and_then(|rest| rest.strip_prefix('='))
            }
        })
    })
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
                .is_some_and(|qb| match (quantity(&qa.0), quantity(&qb.0)) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
                    _ => qa.0 == qb.0,
                })
        })
}

/// A Kubernetes quantity (`1Gi`, `500m`, `1.5`, `2e3`, `1E`) as a number.
fn quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp => 10f64.powi(exp.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use super::quantity;

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(quantity("1Gi"), quantity("1024Mi"));
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("2e3"), Some(2000.0));
        assert_eq!(quantity("1E"), Some(1e18));
        assert_eq!(quantity("lots"), None);
    }
}
