//! Parsing of the human-written durations and limits in the spec.
//!
//! Durations follow Go's `time.ParseDuration` subset that Kubernetes users already write
//! (`90s`, `1m30s`, `1.5h`, `500ms`). Limits carry their unit so a reader sees what is meant:
//! `500ms` (seconds), `15%` (a share), `512Mi` (bytes) or a plain number.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Regex the CRD schema enforces on every duration field; kept next to the parser it mirrors.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";
/// Regex for limits written as strings.
pub const LIMIT_PATTERN: &str = r"^-?[0-9]+([.][0-9]+)?(ms|s|m|h|%|Ki|Mi|Gi|Ti|k|M|G|T)?$";
/// Regex for relative limits (`maxIncrease`).
pub const PERCENT_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?%$";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantityError {
    #[error("{field}: {value:?} is not a duration like 30s, 10m, 1h30m or 500ms")]
    Duration { field: String, value: String },
    #[error("{field}: {value:?} is not a limit like 500ms, 15%, 512Mi or 5")]
    Limit { field: String, value: String },
    #[error("{field}: {value:?} must be a percentage like 10%")]
    Percent { field: String, value: String },
    #[error("{field}: {value:?} {why}")]
    OutOfRange {
        field: String,
        value: String,
        why: &'static str,
    },
}

/// Parses `1h30m`, `90s`, `1.5m`, `500ms`. `field` names the spec field for the error message.
pub fn parse_duration(field: &str, value: &str) -> Result<Duration, QuantityError> {
    let err = || QuantityError::Duration {
        field: field.to_string(),
        value: value.to_string(),
    };
    let mut rest = value.trim();
    if rest.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_end == 0 {
            return Err(err());
        }
        let number: f64 = rest[..num_end].parse().map_err(|_| err())?;
        rest = &rest[num_end..];
        let (scale, unit_len) = if rest.starts_with("ms") {
            (0.001, 2)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else {
            return Err(err());
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 365.0 * 24.0 * 3600.0 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration the way a person writes it (`1m30s`, `500ms`), for PromQL ranges and status.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut secs = ms / 1000;
    let mut out = String::new();
    for (unit, size) in [("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{}", secs / size, unit));
            secs %= size;
        }
    }
    out
}

/// A threshold as written in the spec: an integer or a string with a unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Limit {
    Int(i64),
    Text(String),
}

impl Limit {
    /// The value in base units: seconds, a 0–1 share, bytes, or the plain number.
    pub fn value(&self, field: &str) -> Result<f64, QuantityError> {
        match self {
            Limit::Int(i) => Ok(*i as f64),
            Limit::Text(s) => parse_limit(field, s),
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Int(i) => write!(f, "{i}"),
            Limit::Text(s) => f.write_str(s),
        }
    }
}

/// Longest limit text accepted (`"1536Mi"` is 6); keeps CEL's cost estimate within budget.
pub const MAX_LIMIT_LEN: usize = 32;

impl schemars::JsonSchema for Limit {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Limit".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Same shape as Kubernetes' IntOrString so `max: 5` and `max: "500ms"` are both accepted;
        // a structural schema cannot put a pattern on only the string branch, so CEL checks it.
        // maxLength bounds the rule's estimated cost: without it a real apiserver refuses the
        // whole CRD (rule cost over budget); it applies to the string form only.
        schemars::json_schema!({
            "x-kubernetes-int-or-string": true,
            "maxLength": MAX_LIMIT_LEN,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-validations": [{
                "rule": format!("string(self).matches('{LIMIT_PATTERN}')"),
                "message": "must be a number or a number with a unit: 500ms, 2s, 15%, 512Mi, 5",
            }]
        })
    }
}

pub fn parse_limit(field: &str, value: &str) -> Result<f64, QuantityError> {
    let err = || QuantityError::Limit {
        field: field.to_string(),
        value: value.to_string(),
    };
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let number: f64 = num.parse().map_err(|_| err())?;
    let scale = match unit {
        "" => 1.0,
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "%" => 0.01,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        _ => return Err(err()),
    };
    Ok(number * scale)
}

/// `10%` → 0.10.
pub fn parse_percent(field: &str, value: &str) -> Result<f64, QuantityError> {
    let v = value.trim();
    v.strip_suffix('%')
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| n / 100.0)
        .ok_or_else(|| QuantityError::Percent {
            field: field.to_string(),
            value: value.to_string(),
        })
}

/// A Kubernetes quantity (`1Gi`, `500m`, `1.5`, `2e3`, `1E`) as a number: resource
/// quantities compared by value, CPU limits in cores.
pub fn parse_quantity(s: &str) -> Option<f64> {
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
