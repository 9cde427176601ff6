//! Shared by the analysis tests: specs from YAML and a metric source that answers from a table.

use crate::api::Analysis;

/// `spec.analysis` with these checks (YAML flow list), a Prometheus URL and a 1m interval.
pub(super) fn analysis(checks: &str) -> Analysis {
    serde_yaml::from_str(&format!(
        "prometheus: {{url: http://p:9090}}\ninterval: 1m\nchecks: {checks}\n"
    ))
    .unwrap()
}
