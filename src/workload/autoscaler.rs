//! The target's HorizontalPodAutoscaler, and the candidate's copy of it.
//!
//! The operator never writes the user's HPA. While it runs, it sizes the target for the whole
//! load (the candidate's pods carry the target's labels, so it counts them); the split works
//! around it (`traffic::Sizing::Autoscaled`). At 100 % the target is at 0, where an HPA does
//! nothing, so the candidate — now serving everything — gets a copy that follows the load.

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::deployment::experiment_owner_ref;
use super::error::WorkloadError;
use super::names::{candidate_name, variant_labels, VARIANT_CANDIDATE};
use crate::api::ConcurrencyExperiment;

/// Kubernetes' own default for `spec.minReplicas`.
pub const DEFAULT_MIN_REPLICAS: i32 = 1;

/// Whether `hpa` scales the Deployment `deployment`.
pub fn scales(hpa: &HorizontalPodAutoscaler, deployment: &str) -> bool {
    hpa.spec.as_ref().is_some_and(|s| {
        let r = &s.scale_target_ref;
        r.kind == "Deployment"
            && r.name == deployment
            && r.api_version
                .as_deref()
                .is_none_or(|v| v.starts_with("apps/"))
    })
}

/// The HPA scaling `target` among `hpas` (one namespace's): the first by name when several do
/// (Kubernetes itself then reports `AmbiguousSelector` on them). The candidate's copy, which
/// scales the candidate, is never it.
pub fn target_autoscaler<'a>(
    hpas: impl IntoIterator<Item = &'a HorizontalPodAutoscaler>,
    target: &str,
) -> Option<&'a HorizontalPodAutoscaler> {
    hpas.into_iter()
        .filter(|h| scales(h, target))
        .min_by_key(|h| h.name_any())
}

/// `(minReplicas, maxReplicas)`.
pub fn bounds(hpa: &HorizontalPodAutoscaler) -> (i32, i32) {
    let spec = hpa.spec.as_ref();
    let min = spec
        .and_then(|s| s.min_replicas)
        .unwrap_or(DEFAULT_MIN_REPLICAS);
    let max = spec.map_or(min, |s| s.max_replicas);
    (min, max.max(min))
}

/// The candidate's HPA: the user's spec (metrics, bounds, behavior) aimed at the candidate
/// Deployment, named like it, owned by the experiment.
pub fn candidate_autoscaler(
    user: &HorizontalPodAutoscaler,
    experiment: &ConcurrencyExperiment,
) -> Result<HorizontalPodAutoscaler, WorkloadError> {
    let target = &experiment.spec.target_ref.name;
    let spec = user
        .spec
        .as_ref()
        .ok_or_else(|| WorkloadError::MissingField {
            kind: "HorizontalPodAutoscaler",
            name: user.name_any(),
            field: "spec",
        })?;
    let name = candidate_name(target);
    Ok(HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: experiment.namespace(),
            labels: Some(variant_labels(&experiment.name_any(), VARIANT_CANDIDATE)),
            owner_references: Some(vec![experiment_owner_ref(experiment)?]),
            ..ObjectMeta::default()
        },
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name,
            },
            ..spec.clone()
        }),
        status: None,
    })
}
