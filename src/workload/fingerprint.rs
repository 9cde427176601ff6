//! A fingerprint of the target's pod template. Recorded when an experiment starts
//! (`status.original.templateHash`): if it differs mid-flight, the baseline being compared is
//! no longer the one the experiment started with, and promoting would write the candidate
//! config onto a template nobody judged.

use std::fmt;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use ring::digest::{digest, SHA256};
use serde_json::{json, Value};

/// `t=<whole>,c=<containers>,i=<images>,e=<env>`: SHA-256 (hex, cut short) of the whole pod
/// template serialized canonically — nothing left out, so any edit of the template counts —,
/// then of the parts an edit is usually in, so that a change can be named without storing the
/// template. Only `t` decides whether the template changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateFingerprint {
    pub(super) whole: String,
    /// Names of the init and app containers, in order.
    containers: String,
    /// Each container's image.
    images: String,
    /// Each container's `env` and `envFrom`.
    env: String,
}

impl TemplateFingerprint {
    pub fn of(template: &PodTemplateSpec) -> Self {
        let (init, app) = template
            .spec
            .as_ref()
            .map(|s| {
                (
                    s.init_containers.as_deref().unwrap_or_default(),
                    &s.containers[..],
                )
            })
            .unwrap_or_default();
        let each = |f: &dyn Fn(&Container) -> Value| {
            json!({
                "init": init.iter().map(f).collect::<Vec<_>>(),
                "app": app.iter().map(f).collect::<Vec<_>>(),
            })
        };
        Self {
            whole: hash(&serde_json::to_value(template).unwrap_or(Value::Null), 16),
            containers: hash(&each(&|c| json!(c.name)), 8),
            images: hash(&each(&|c| json!([c.name, c.image])), 8),
            env: hash(
                &each(&|c| {
                    let env = serde_json::to_value(&c.env).unwrap_or(Value::Null);
                    let from = serde_json::to_value(&c.env_from).unwrap_or(Value::Null);
                    json!([c.name, env, from])
                }),
                8,
            ),
        }
    }

    /// Reads back what [`Display`](fmt::Display) wrote. Anything else is taken as a bare hash
    /// of the whole template (its parts unknown), so a future format still compares.
    pub fn parse(s: &str) -> Self {
        let field = |key: &str| {
            s.split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        match field("t") {
            whole if !whole.is_empty() => Self {
                whole,
                containers: field("c"),
                images: field("i"),
                env: field("e"),
            },
            _ => Self {
                whole: s.to_string(),
                containers: String::new(),
                images: String::new(),
                env: String::new(),
            },
        }
    }

    /// The template is a different one (whatever changed in it).
    pub fn differs(&self, other: &Self) -> bool {
        self.whole != other.whole
    }

    /// What changed from `self` to `now`, for people: `container set` (a container renamed,
    /// added or removed — images and env are per container, so they are not named then),
    /// `image`, `env`, or else `pod template` (resources, probes, labels, …). Empty when
    /// nothing did.
    pub fn changes(&self, now: &Self) -> Vec<&'static str> {
        if !self.differs(now) {
            return Vec::new();
        }
        let changed = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
        if changed(&self.containers, &now.containers) {
            return vec!["container set"];
        }
        let named: Vec<&'static str> = [
            ("image", &self.images, &now.images),
            ("env", &self.env, &now.env),
        ]
        .into_iter()
        .filter(|(_, a, b)| changed(a, b))
        .map(|(name, _, _)| name)
        .collect();
        if named.is_empty() {
            vec!["pod template"]
        } else {
            named
        }
    }
}

impl fmt::Display for TemplateFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "t={},c={},i={},e={}",
            self.whole, self.containers, self.images, self.env
        )
    }
}

/// SHA-256 of `value` serialized canonically, as `hex_len` hex digits.
fn hash(value: &Value, hex_len: usize) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    digest(&SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(hex_len)
        .collect()
}

/// JSON with object keys sorted at every level, so the text (and the hash) does not depend on
/// field order — of k8s-openapi's structs or of serde_json's map.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
