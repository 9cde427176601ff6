//! The app container's environment as the kubelet builds it — `envFrom` sources in order, then
//! `env` entries in order, later ones winning — for the few variables the server reads.
//!
//! ConfigMaps are read (the controller fetches the ones the container references and passes
//! their data in); Secrets never are, so a value from a Secret is reported as unknown.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvVar};

/// ConfigMap data by ConfigMap name (same namespace as the target). A name absent here was
/// not found (or could not be read).
pub type ConfigMaps = BTreeMap<String, BTreeMap<String, String>>;

/// One variable as the container will see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvValue {
    /// The value, when the operator can know it.
    pub value: Option<String>,
    /// Why the value is unknown: `unknown (from Secret app-env)`.
    pub unknown: Option<String>,
    /// Only possibly set: a Secret or missing ConfigMap through `envFrom` may or may not
    /// carry the name.
    pub possibly: bool,
}

impl EnvValue {
    pub fn known(value: impl Into<String>) -> Self {
        Self {
            value: Some(value.into()),
            ..Self::default()
        }
    }
    fn unknown(why: String) -> Self {
        Self {
            unknown: Some(why),
            ..Self::default()
        }
    }
    fn possibly(why: String) -> Self {
        Self {
            possibly: true,
            ..Self::unknown(why)
        }
    }
}

/// The ConfigMaps whose data can decide one of `names` in `container`: every `envFrom`
/// ConfigMap, and the `configMapKeyRef` of an `env` entry for one of `names`.
pub fn referenced_config_maps(container: &Container, names: &[&str]) -> BTreeSet<String> {
    let from = container
        .env_from
        .iter()
        .flatten()
        .filter_map(|s| s.config_map_ref.as_ref().map(|r| r.name.clone()));
    let keyed = container
        .env
        .iter()
        .flatten()
        .filter(|v| names.contains(&v.name.as_str()))
        .filter_map(|v| {
            v.value_from
                .as_ref()
                .and_then(|f| f.config_map_key_ref.as_ref())
                .map(|r| r.name.clone())
        });
    from.chain(keyed).filter(|n| !n.is_empty()).collect()
}

/// The values of `names` in `container`; a name set nowhere is absent from the map.
pub fn resolve_env(
    container: &Container,
    names: &[&'static str],
    config_maps: &ConfigMaps,
) -> BTreeMap<&'static str, EnvValue> {
    let mut out: BTreeMap<&'static str, EnvValue> = BTreeMap::new();
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.as_deref().unwrap_or_default();
        if let Some(r) = &source.config_map_ref {
            match config_maps.get(&r.name) {
                Some(data) => {
                    for &name in names {
                        let value = name.strip_prefix(prefix).and_then(|key| data.get(key));
                        if let Some(v) = value {
                            out.insert(name, EnvValue::known(v.clone()));
                        }
                    }
                }
                // An optional ConfigMap that does not exist sets nothing; a required one keeps
                // the pods from starting, and what it would set is unknown.
                None if r.optional == Some(true) => {}
                None => {
                    for &name in names {
                        out.entry(name).or_insert_with(|| {
                            EnvValue::possibly(format!(
                                "unknown (envFrom ConfigMap {} not found or not readable)",
                                r.name
                            ))
                        });
                    }
                }
            }
        }
        // A Secret may set any name; it only decides names nothing else has set so far (a
        // Secret carrying WEB_CONCURRENCY next to a ConfigMap that does is not assumed).
        if let Some(r) = &source.secret_ref {
            for &name in names {
                out.entry(name).or_insert_with(|| {
                    EnvValue::possibly(format!("unknown (from Secret {}, if it sets it)", r.name))
                });
            }
        }
    }
    for var in container.env.iter().flatten() {
        let Some(&name) = names.iter().find(|n| **n == var.name) else {
            continue;
        };
        if let Some(value) = entry_value(var, config_maps) {
            out.insert(name, value);
        }
    }
    out
}

/// One `env` entry; `None` when it sets nothing (an optional reference that is missing).
fn entry_value(var: &EnvVar, config_maps: &ConfigMaps) -> Option<EnvValue> {
    let Some(from) = &var.value_from else {
        return Some(EnvValue::known(var.value.clone().unwrap_or_default()));
    };
    if let Some(r) = &from.config_map_key_ref {
        let optional = r.optional == Some(true);
        return match config_maps.get(&r.name) {
            Some(data) => match data.get(&r.key) {
                Some(v) => Some(EnvValue::known(v.clone())),
                None if optional => None,
                None => Some(EnvValue::unknown(format!(
                    "unknown (ConfigMap {} has no key {})",
                    r.name, r.key
                ))),
            },
            None if optional => None,
            None => Some(EnvValue::unknown(format!(
                "unknown (ConfigMap {} not found or not readable)",
                r.name
            ))),
        };
    }
    if let Some(r) = &from.secret_key_ref {
        return Some(EnvValue::unknown(format!(
            "unknown (from Secret {} key {})",
            r.name, r.key
        )));
    }
    if let Some(r) = &from.resource_field_ref {
        return Some(EnvValue::unknown(format!(
            "unknown (from resourceFieldRef {})",
            r.resource
        )));
    }
    if let Some(r) = &from.field_ref {
        return Some(EnvValue::unknown(format!(
            "unknown (from fieldRef {})",
            r.field_path
        )));
    }
    Some(EnvValue::unknown("unknown (valueFrom)".into()))
}
