//! PromQL templates: `{{namespace}}`, `{{pods}}`, `{{interval}}`, `{{container}}`, `{{window}}`, filled in
//! per variant.
//!
//! Values are meant to sit inside double-quoted PromQL strings (`pod=~"{{pods}}"`). Every value
//! is escaped for that string (backslash and quote; control characters refused), and the pod
//! regex escapes the Deployment name's regex metacharacters, so no name can widen a selector
//! or end the string early.

use std::time::Duration;

use crate::api::format_duration;

/// The Kubernetes "safe encoding" alphabet (`k8s.io/apimachinery/pkg/util/rand`): no vowels,
/// no 0/1/3, so generated names never spell words. ReplicaSet hashes and pod-name suffixes
/// both use it.
pub const SAFE_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

/// `generateName` keeps at most 63 − 5 characters of the base (the ReplicaSet name plus `-`)
/// before appending its 5 random characters.
const MAX_GENERATED_BASE: usize = 58;

/// A `pod-template-hash` is a uint32 printed in decimal and safe-encoded: 1 to 10 characters.
const MAX_HASH_LEN: usize = 10;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    #[error("check {check}: unknown template variable {{{{{var}}}}} (known: namespace, pods, interval, container, window)")]
    UnknownVariable { check: String, var: String },
    #[error("check {check}: `{{{{` without a closing `}}}}`")]
    Unterminated { check: String },
    #[error("check {check}: the value of {{{{{var}}}}} contains a control character and cannot be put into a query")]
    UnsafeValue { check: String, var: String },
}

impl TemplateError {
    pub fn category(&self) -> &'static str {
        match self {
            TemplateError::UnknownVariable { .. } => "UnknownTemplateVariable",
            TemplateError::Unterminated { .. } => "BadTemplate",
            TemplateError::UnsafeValue { .. } => "UnsafeTemplateValue",
        }
    }
}

/// The values for one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateVars {
    pub namespace: String,
    /// Anchored regex of the variant's pod names (unescaped; escaped when rendered).
    pub pods: String,
    /// The analysis interval, the PromQL range.
    pub interval: Duration,
    pub container: String,
    /// Since the stage began, at least `interval` (a fit over the stage: memoryGrowth).
    pub window: Duration,
}

/// A value placed inside a double-quoted PromQL string: `\` and `"` are escaped; newlines and
/// other control characters are refused (`None`) rather than guessed at.
pub fn escape_label_value(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// Escapes RE2's metacharacters so the text matches only itself.
pub fn escape_regex(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Anchored regex matching exactly the pods of Deployment `deployment`:
/// `<deployment>-<rs hash>-<5 char suffix>`. Another Deployment `<deployment>-x` or the
/// candidate `<deployment>-candidate` never matches: their pods carry one more `-` segment, and
/// `-` is not in the safe alphabet.
pub fn pods_regex(deployment: &str) -> String {
    format!("^{}$", pods_pattern(deployment))
}

/// Anchored regex matching the pods of any of these Deployments (e.g. both variants).
pub fn pods_regex_any(deployments: &[&str]) -> String {
    let parts: Vec<String> = deployments.iter().map(|d| pods_pattern(d)).collect();
    format!("^(?:{})$", parts.join("|"))
}

fn pods_pattern(deployment: &str) -> String {
    let class = format!("[{SAFE_ALPHABET}]");
    let name = escape_regex(deployment);
    let len = deployment.len();
    if len + MAX_HASH_LEN + 2 <= MAX_GENERATED_BASE {
        return format!("{name}-{class}{{1,{MAX_HASH_LEN}}}-{class}{{5}}");
    }
    // Long names: generateName cut `<deployment>-<hash>-` at 58 characters, so the tail of
    // the hash (and the dash) may be missing. One alternative per possible hash length.
    let mut alternatives: Vec<String> = Vec::new();
    for hash_len in 1..=MAX_HASH_LEN {
        let base_len = len + 1 + hash_len + 1;
        let alt = if base_len <= MAX_GENERATED_BASE {
            format!("{name}-{class}{{{hash_len}}}-{class}{{5}}")
        } else if len < MAX_GENERATED_BASE {
            let kept_hash = MAX_GENERATED_BASE - len - 1;
            format!("{name}-{class}{{{}}}", kept_hash + 5)
        } else {
            // The name itself was cut; pods of Deployments sharing these 58 characters are
            // indistinguishable by name (Kubernetes' own limit).
            let kept: String = deployment.chars().take(MAX_GENERATED_BASE).collect();
            format!("{}{class}{{5}}", escape_regex(&kept))
        };
        if !alternatives.contains(&alt) {
            alternatives.push(alt);
        }
    }
    if alternatives.len() == 1 {
        alternatives.remove(0)
    } else {
        format!("(?:{})", alternatives.join("|"))
    }
}

/// Fills in `{{var}}` (whitespace inside the braces allowed). `check` names the check in errors.
pub fn render(check: &str, template: &str, vars: &TemplateVars) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| TemplateError::Unterminated {
                check: check.to_string(),
            })?;
        let var = after[..end].trim();
        let unsafe_value = || TemplateError::UnsafeValue {
            check: check.to_string(),
            var: var.to_string(),
        };
        let value = match var {
            "namespace" => escape_label_value(&vars.namespace).ok_or_else(unsafe_value)?,
            "pods" => escape_label_value(&vars.pods).ok_or_else(unsafe_value)?,
            "container" => escape_label_value(&vars.container).ok_or_else(unsafe_value)?,
            "interval" => format_duration(vars.interval),
            "window" => format_duration(vars.window),
            other => {
                return Err(TemplateError::UnknownVariable {
                    check: check.to_string(),
                    var: other.to_string(),
                })
            }
        };
        out.push_str(&value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables a template uses, for validation without values.
pub fn check_variables(check: &str, template: &str) -> Result<(), TemplateError> {
    let vars = TemplateVars {
        namespace: String::new(),
        pods: String::new(),
        interval: Duration::from_secs(60),
        container: String::new(),
        window: Duration::from_secs(60),
    };
    render(check, template, &vars).map(|_| ())
}
