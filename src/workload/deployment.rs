//! The variants' Deployments (the candidate, a selection's candidates, the fresh baseline),
//! the promoted template, and what status says about each.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{LifecycleHandler, PodTemplateSpec, SleepAction};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::fingerprint::TemplateFingerprint;
use super::names::{
    candidate_name, fresh_baseline_name, variant_label, variant_labels, variant_name,
    POD_TEMPLATE_HASH, VARIANT_CANDIDATE, VARIANT_FRESH_BASELINE,
};
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

/// The candidate the stages walk: `<target>-candidate`, with `spec.candidate` or, after a
/// selection, its winner (see [`variant_deployment`]).
pub fn candidate_deployment(
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    replicas: i32,
) -> Result<Deployment, WorkloadError> {
    let variant = Variant {
        name: candidate_name(&target.name_any()),
        label: VARIANT_CANDIDATE.to_string(),
        config: Some(experiment.spec.walked_candidate(experiment.status.as_ref())),
    };
    variant_deployment(target, experiment, &variant, replicas)
}

/// Candidate `index` of a selection: `<target>-candidate-<index + 1>` with
/// `spec.candidates[index]`.
pub fn selection_variant_deployment(
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    index: usize,
    replicas: i32,
) -> Result<Deployment, WorkloadError> {
    let config = experiment
        .spec
        .candidate_list()
        .get(index)
        .ok_or(WorkloadError::NoSuchCandidate { index })?;
    let variant = Variant {
        name: variant_name(&target.name_any(), index),
        label: variant_label(index),
        config: Some(config),
    };
    variant_deployment(target, experiment, &variant, replicas)
}

/// The fresh baseline: the target's template unchanged (plus the variant labels), started
/// with the candidates so its pods are as young as theirs. It carries the fingerprint of the
/// template it copied ([`ANNOTATION_TARGET_TEMPLATE`]), which is how it is known to be current.
pub fn fresh_baseline_deployment(
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    replicas: i32,
) -> Result<Deployment, WorkloadError> {
    let variant = Variant {
        name: fresh_baseline_name(&target.name_any()),
        label: VARIANT_FRESH_BASELINE.to_string(),
        config: None,
    };
    let mut d = variant_deployment(target, experiment, &variant, replicas)?;
    d.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            ANNOTATION_TARGET_TEMPLATE.to_string(),
            target_template(target),
        );
    Ok(d)
}

/// On the fresh baseline: the [`TemplateFingerprint`] of the target template it copies.
pub const ANNOTATION_TARGET_TEMPLATE: &str = "concurrency.dev/target-template";

fn target_template(target: &Deployment) -> String {
    let template = target
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    TemplateFingerprint::of(&template).to_string()
}

/// The fresh baseline `fresh` was made from the target's template as it is now.
pub fn copies_target_template(fresh: &Deployment, target: &Deployment) -> bool {
    fresh.annotations().get(ANNOTATION_TARGET_TEMPLATE) == Some(&target_template(target))
}

/// One Deployment a variant runs in: its name, `LABEL_VARIANT` value and server config
/// (`None`: the target's template as it is — the fresh baseline).
pub struct Variant<'a> {
    pub name: String,
    pub label: String,
    pub config: Option<&'a ServerConfig>,
}

/// A variant: the target's Deployment with the variant's server config in its app container,
/// its own selector (target labels + variant + experiment) and `replicas` pods. Probes,
/// volumes, pod annotations, strategy — everything else is the target's.
pub fn variant_deployment(
    target: &Deployment,
    experiment: &ConcurrencyExperiment,
    variant: &Variant,
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
    let ours = variant_labels(&experiment.name_any(), &variant.label);

    let mut match_labels = target_match_labels(target)?;
    match_labels.extend(ours.clone());

    let mut template = match variant.config {
        Some(config) => promoted_template(target, config, experiment.spec.container.as_deref())?,
        None => target_spec.template.clone(),
    };
    let index = app_container_index(target, experiment.spec.container.as_deref())?;
    add_drain(&mut template, index, experiment.spec.traffic.drain_delay());
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.remove(POD_TEMPLATE_HASH);
    labels.extend(match_labels.clone());

    let mut deployment_labels = target.labels().clone();
    deployment_labels.extend(ours);
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(variant.name.clone()),
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

/// Pods the operator removes must not depend on the app's shutdown to lose no request: a
/// terminating pod leaves the Service's endpoints at once, but every node's kube-proxy (and a
/// client's kept-alive connection) takes a moment to follow. A `preStop` sleep of `delay` on
/// the app container keeps it serving meanwhile; SIGTERM comes after it. The app's own
/// `preStop` wins (it knows its drain), and the grace period grows to cover the sleep.
fn add_drain(template: &mut PodTemplateSpec, index: usize, delay: std::time::Duration) {
    let secs = i64::try_from(delay.as_secs()).unwrap_or(i64::MAX);
    let Some(pod) = template.spec.as_mut().filter(|_| secs > 0) else {
        return;
    };
    let Some(app) = pod.containers.get_mut(index) else {
        return;
    };
    let lifecycle = app.lifecycle.get_or_insert_with(Default::default);
    if lifecycle.pre_stop.is_some() {
        return;
    }
    lifecycle.pre_stop = Some(LifecycleHandler {
        sleep: Some(SleepAction { seconds: secs }),
        ..LifecycleHandler::default()
    });
    // Kubernetes' default grace is 30 s, and it counts the preStop: keep what the app had
    // for its own shutdown after the sleep.
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    pod.termination_grace_period_seconds = Some(grace.saturating_add(secs));
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
