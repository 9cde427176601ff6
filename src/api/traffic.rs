//! How the stage weight is applied to live traffic.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::quantity::DURATION_PATTERN;

/// `spec.traffic.scaleDownDelay`'s default. A Gateway's data plane applies a route change a
/// moment after the HTTPRoute is written (Traefik throttles its providers by 2 s; under load
/// it took longer here); pods removed before that answer 503s.
pub const DEFAULT_SCALE_DOWN_DELAY: &str = "10s";

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum Router {
    /// Candidate pods join the target's existing Service; the split follows the replica ratio.
    #[default]
    #[serde(rename = "replicas")]
    Replicas,
    /// An HTTPRoute's backendRef weights split traffic between a baseline and a candidate Service.
    #[serde(rename = "gatewayAPI")]
    GatewayApi,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.router != 'gatewayAPI' || has(self.httpRoute)").message("router gatewayAPI needs httpRoute").field_path(".httpRoute").reason(kube::core::Reason::FieldValueRequired),
    validation = Rule::new("self.router == 'gatewayAPI' || !has(self.httpRoute)").message("httpRoute is only used by router gatewayAPI").field_path(".httpRoute").reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("self.router == 'gatewayAPI' || !has(self.scaleDownDelay)").message("scaleDownDelay is only used by router gatewayAPI (the replicas router moves traffic by removing pods)").field_path(".scaleDownDelay").reason(kube::core::Reason::FieldValueForbidden)
)]
pub struct Traffic {
    /// `replicas` (default) or `gatewayAPI`.
    #[serde(default)]
    pub router: Router,
    /// HTTPRoute (same namespace) whose rules send traffic to the target; gatewayAPI only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub http_route: Option<String>,
    /// The Service in front of the target; default: the Service the HTTPRoute points at, or
    /// the one whose selector matches the target's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub service: Option<String>,
    /// gatewayAPI only: how long a variant's pods are kept after the route stopped sending
    /// them traffic, so the Gateway's data plane has applied the change before they go (Argo
    /// Rollouts' `scaleDownDelaySeconds`). Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub scale_down_delay: Option<String>,
    /// How long a pod the operator removes (candidate, selection variant, fresh baseline) goes
    /// on serving after it left the Service's endpoints, before it is told to stop: a
    /// `preStop` sleep the operator adds to the app container of the pods it creates when the
    /// target's has no `preStop` of its own, so that no request is lost even if the app exits
    /// at SIGTERM. Default `10s`; `0s` adds none; at most `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub drain_delay: Option<String>,
}

/// `spec.traffic.drainDelay` when omitted.
pub const DEFAULT_DRAIN_DELAY: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest `spec.traffic.drainDelay`: every removal of a pod waits for it.
pub const MAX_DRAIN_DELAY: std::time::Duration = std::time::Duration::from_secs(300);

impl Traffic {
    /// `drainDelay` as a duration; the default when omitted or not parseable (validation
    /// refuses the latter before anything is rendered).
    pub fn drain_delay(&self) -> std::time::Duration {
        self.drain_delay
            .as_deref()
            .and_then(|d| super::parse_duration("spec.traffic.drainDelay", d).ok())
            .unwrap_or(DEFAULT_DRAIN_DELAY)
            .min(MAX_DRAIN_DELAY)
    }
}
