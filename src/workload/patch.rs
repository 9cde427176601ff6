//! What `promotion: external` needs instead of writing the target: the candidate config as a
//! patch a person commits to Git, and a fingerprint to recognise the target once Git applied
//! it. Both come from `render_server`, the rendering the candidate Deployment gets, so what is
//! committed is exactly what was judged.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar};
use serde_yaml::{Mapping, Value};

use super::deployment::promoted_template;
use super::fingerprint::TemplateFingerprint;
use super::render::{app_container, render_server};
use super::WorkloadError;
use crate::api::{PromotionPatch, ServerConfig};

/// The change that makes the target's app container run `config`: env entries set or removed,
/// command, args and resources where the rendering changes them — nothing else.
pub fn promotion_patch(
    target: &Deployment,
    config: &ServerConfig,
    container: Option<&str>,
) -> Result<PromotionPatch, WorkloadError> {
    let before = app_container(target, container)?;
    let mut after = before.clone();
    render_server(&mut after, config)?;
    let mut entry = Mapping::new();
    entry.insert("name".into(), before.name.clone().into());
    let mut said = Vec::new();
    env_changes(before, &after, &mut entry, &mut said);
    if after.command != before.command {
        entry.insert("command".into(), yaml(&after.command));
        said.push(format!("command {}", list(&after.command)));
    }
    if after.args != before.args {
        entry.insert("args".into(), yaml(&after.args));
        said.push(format!("args {}", list(&after.args)));
    }
    if after.resources != before.resources {
        entry.insert("resources".into(), yaml(&after.resources));
        said.push("resources from spec.candidate.resources".into());
    }
    let summary = if said.is_empty() {
        format!(
            "nothing to change: container {} already runs it",
            before.name
        )
    } else {
        format!("{} on container {}", said.join("; "), before.name)
    };
    let mut containers = Mapping::new();
    containers.insert("containers".into(), Value::Sequence(vec![entry.into()]));
    let patch = nest(&["spec", "template", "spec"], containers.into());
    Ok(PromotionPatch {
        container: before.name.clone(),
        summary,
        // Plain mappings of strings always serialize.
        strategic_merge_patch: serde_yaml::to_string(&patch).unwrap_or_default(),
    })
}

/// Env entries the rendering set to a new value (merged by name), then those it removed
/// (`$patch: delete`, the strategic merge directive).
fn env_changes(before: &Container, after: &Container, entry: &mut Mapping, said: &mut Vec<String>) {
    let old = before.env.as_deref().unwrap_or_default();
    let new = after.env.as_deref().unwrap_or_default();
    let find = |env: &[EnvVar], name: &str| env.iter().find(|v| v.name == name).cloned();
    let mut entries = Vec::new();
    let mut set = Vec::new();
    for v in new {
        if find(old, &v.name).as_ref() != Some(v) {
            entries.push(yaml(v));
            let value = v.value.as_deref().unwrap_or("(valueFrom)");
            set.push(format!("{}={value}", v.name));
        }
    }
    let mut removed = Vec::new();
    for v in old {
        if find(new, &v.name).is_none() && !removed.contains(&v.name) {
            let mut gone = Mapping::new();
            gone.insert("name".into(), v.name.clone().into());
            gone.insert("$patch".into(), "delete".into());
            entries.push(gone.into());
            removed.push(v.name.clone());
        }
    }
    if !set.is_empty() {
        said.push(format!("set {}", set.join(", ")));
    }
    if !removed.is_empty() {
        said.push(format!("remove {}", removed.join(", ")));
    }
    if !entries.is_empty() {
        entry.insert("env".into(), Value::Sequence(entries));
    }
}

/// The fingerprint of the target's template once it carries `config`, with every container's
/// env sorted by name: a person writing the variables into the manifest in another order has
/// changed nothing else. The template as the experiment found it and the template Git brings
/// with the candidate config give the same answer; a template that also changed anything else
/// (image, another variable, probes…) does not. `None` when `config` cannot be rendered.
pub fn promoted_fingerprint(
    target: &Deployment,
    config: &ServerConfig,
    container: Option<&str>,
) -> Option<String> {
    let mut template = promoted_template(target, config, container).ok()?;
    if let Some(pod) = template.spec.as_mut() {
        let init = pod.init_containers.iter_mut().flatten();
        for c in pod.containers.iter_mut().chain(init) {
            if let Some(env) = c.env.as_mut() {
                env.sort_by(|a, b| a.name.cmp(&b.name));
            }
        }
    }
    Some(TemplateFingerprint::of(&template).to_string())
}

/// k8s-openapi values are plain data: serializing them does not fail.
fn yaml(v: &impl serde::Serialize) -> Value {
    serde_yaml::to_value(v).unwrap_or(Value::Null)
}

fn list(v: &Option<Vec<String>>) -> String {
    match v {
        Some(items) => format!("[{}]", items.join(", ")),
        None => "(the image's)".into(),
    }
}

fn nest(path: &[&str], inner: Value) -> Value {
    path.iter().rev().fold(inner, |acc, key| {
        let mut m = Mapping::new();
        m.insert((*key).into(), acc);
        m.into()
    })
}
