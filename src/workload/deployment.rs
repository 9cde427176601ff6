//! The candidate Deployment, the promoted template, and what status says about each.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::names::{candidate_name, variant_labels, POD_TEMPLATE_HASH, VARIANT_CANDIDATE};
use super::render::{app_container_index, render_server};
use super::WorkloadError;
use crate::api::{ConcurrencyExperiment, RenderedServer, ServerConfig, VariantStatus};

/// What the stage machine needs to know of a Deployment (the target or the candidate).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DeploymentState {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
    /// The controller has observed the latest generation and all replicas are updated,
    /// available and no old ones remain (what `kubectl rollout status` waits for).
    pub rolled_out: bool,
}

/// The target's `spec.selector.matchLabels` (without `pod-template-hash`). Every pod that
/// serves the app carries them, so the user's Service selects candidate pods too.
pub fn target_match_labels(target: &Deployment) -> Result<BTreeMap<String, String>, WorkloadError> {
    let selector = target.spec.as_ref().map(|s| &s.selector);
    let mut labels = selector
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    labels.remove(POD_TEMPLATE_HASH);
    if labels.is_empty() {
        let deployment = target.name_any();
        let has_expressions = selector
            .and_then(|s| s.match_expressions.as_ref())
            .is_some_and(|e| !e.is_empty());
        return Err(if has_expressions {
            WorkloadError::MatchExpressionsSelector { deployment }
        } else {
            WorkloadError::NoSelector { deployment }
        });
    }
    Ok(labels)
}

/// Owner reference making the experiment the controller of what it creates, so deleting the
/// experiment garbage-collects the candidate and its Services.
pub fn experiment_owner_ref(
    experiment: &ConcurrencyExperiment,
) -> Result<OwnerReference, WorkloadError> {
    let owner =
        experiment
            .controller_owner_ref(&())
            .ok_or_else(|| WorkloadError::MissingField {
                kind: "ConcurrencyExperiment",
                name: experiment.name_any(),
                field: "metadata.name and metadata.uid",
            })?;
    Ok(OwnerReference {
        block_owner_deletion: Some(true),
        ..owner
    })
}

/// The candidate: the target's Deployment with the candidate server config in its app
/// container, its own selector (target labels + variant + experiment) and `replicas` pods.
/// Probes, volumes, pod annotations, strategy — everything else is the target's.
pub fn candidate_deployment(
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    replicas: i32,
) -> Result<Deployment, WorkloadError> {
    let target_spec = target
        .spec
        .as_ref()
        .ok_or_else(|| WorkloadError::MissingField {
            kind: "Deployment",
            name: target.name_any(),
            field: "spec",
        })?;
    let owner = experiment_owner_ref(experiment)?;
    let ours = variant_labels(&experiment.name_any(), VARIANT_CANDIDATE);

    let mut match_labels = target_match_labels(target)?;
    match_labels.extend(ours.clone());

    let mut template = promoted_template(
        target,
        experiment.spec.single_candidate(),
        experiment.spec.container.as_deref(),
    )?;
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.remove(POD_TEMPLATE_HASH);
    labels.extend(match_labels.clone());

    let mut deployment_labels = target.labels().clone();
    deployment_labels.extend(ours);
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(candidate_name(&target.name_any())),
            namespace: target.namespace().or_else(|| experiment.namespace()),
            labels: Some(deployment_labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(match_labels),
                match_expressions: target_spec.selector.match_expressions.clone(),
            },
            template,
            paused: None,
            ..target_spec.clone()
        }),
        status: None,
    })
}

/// The target's pod template with `config` written into its app container: what promotion
/// writes (as a JSON merge patch of `spec.template`).
pub fn promoted_template(
    target: &Deployment,
    config: &ServerConfig,
    container: Option<&str>,
) -> Result<PodTemplateSpec, WorkloadError> {
    let index = app_container_index(target, container)?;
    let mut template = target
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let app = template
        .spec
        .as_mut()
        .and_then(|p| p.containers.get_mut(index))
        .ok_or_else(|| WorkloadError::NoContainers {
            deployment: target.name_any(),
        })?;
    render_server(app, config)?;
    Ok(template)
}

/// One variant as status shows it; `pods` is the regex its queries get for `{{pods}}`.
pub fn variant_status(deployment: &Deployment, config: RenderedServer) -> VariantStatus {
    let state = rollout_state(deployment);
    let name = deployment.name_any();
    VariantStatus {
        pods: Some(crate::analysis::pods_regex(&name)),
        deployment: name,
        replicas: state.replicas,
        ready_replicas: state.ready_replicas,
        summary: config.summary(),
        config,
    }
}

/// Replica counts and whether the Deployment has finished rolling out, judged as
/// `kubectl rollout status` does.
pub fn rollout_state(d: &Deployment) -> DeploymentState {
    // The API server defaults an absent `spec.replicas` to 1.
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let observed = status
        .observed_generation
        .is_some_and(|o| o >= d.metadata.generation.unwrap_or(0));
    DeploymentState {
        replicas,
        ready_replicas: status.ready_replicas.unwrap_or(0),
        rolled_out: observed
            && status.updated_replicas.unwrap_or(0) == replicas
            && status.available_replicas.unwrap_or(0) == replicas
            && status.replicas.unwrap_or(0) == replicas,
    }
}
