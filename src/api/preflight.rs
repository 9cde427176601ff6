//! `status.preflight`: the series lookup made before anything is created (docs/experiment-reference.md,
//! "Pre-flight").

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightStatus {
    /// When the lookup first ran: while it cannot decide (Prometheus unreachable, the pods not
    /// scraped yet, no request served yet) it is repeated until `spec.progressDeadline` from
    /// here.
    pub since: Time,
    /// When every check's series were found. From then on the lookup is never repeated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_at: Option<Time>,
    /// Why it has not passed (what it waits for, or what is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
