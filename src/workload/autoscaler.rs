//! The target's HorizontalPodAutoscaler: found by its `scaleTargetRef`, only ever read.
//!
//! While the experiment runs it sizes the target for the whole load (the candidate's pods carry
//! the target's labels, so it counts them); the split works around it
//! (`traffic::Sizing::Autoscaled`). No copy for the candidate: the HPA controller refuses two
//! HPAs selecting the same pods (`AmbiguousSelector`), and the target's selects the candidate's.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;

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
/// (Kubernetes itself then reports `AmbiguousSelector` on them).
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
