//! Carry out the stage machine's actions, in order, each idempotent.
//!
//! Two write styles, on purpose:
//! - objects the operator creates (candidate Deployment, variant Services) are server-side
//!   applied with one field manager and an owner reference, so re-applying is a no-op and
//!   garbage collection removes them with the experiment. They are only ever written or
//!   deleted when absent or observed as this experiment's (owner reference to its UID), and
//!   every write and delete of an existing one carries the UID it was observed with, so an
//!   object replaced meanwhile is refused by the API server rather than taken over;
//! - objects the user owns (target Deployment, HTTPRoute) get JSON merge patches of just the
//!   fields the operator changes, so it never holds SSA ownership that would delete the user's
//!   fields when released.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::EventType as KubeEventType;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde_json::json;

use super::context::Context;
use super::error::{is_not_found, Error, Result};
use super::observe::fetch::Fetched;
use super::observe::observations::{owned_services, service_named};
use super::observe::owner::owned_by;
use crate::api::{ConcurrencyExperiment, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY};
use crate::plan::{Action, EventType};
use crate::{traffic, workload};

mod keep;
mod route;
mod variants;

/// Executes one reconcile's actions against the cluster.
pub struct Actor<'a> {
    ctx: &'a Context,
    exp: &'a ConcurrencyExperiment,
    fetched: &'a Fetched,
    /// `status.original.routeBackendRefs` as saved by the stage machine (gatewayAPI restore).
    original_route: Option<&'a str>,
    ns: String,
}

impl<'a> Actor<'a> {
    pub fn new(
        ctx: &'a Context,
        exp: &'a ConcurrencyExperiment,
        fetched: &'a Fetched,
        original_route: Option<&'a str>,
    ) -> Result<Self> {
        let ns = exp.namespace().ok_or(Error::MissingNamespace)?;
        Ok(Self {
            ctx,
            exp,
            fetched,
            original_route,
            ns,
        })
    }

    /// Runs the actions in order and stops at the first failure: later actions (removing the
    /// candidate after restoring the baseline, say) must not run when an earlier one failed.
    pub async fn execute(&self, actions: &[Action]) -> Result<()> {
        for action in actions {
            tracing::debug!(?action, experiment = %self.exp.name_any(), "executing");
            match action {
                Action::EnsureCandidate { replicas } => self.ensure_candidate(*replicas).await?,
                Action::ScaleTarget { replicas } => self.scale_target(*replicas).await?,
                Action::SetRouteWeights {
                    candidate_weight,
                    fresh_baseline,
                } => {
                    self.set_route_weights(*candidate_weight, *fresh_baseline)
                        .await?
                }
                Action::RestoreRoute => self.restore_route().await?,
                Action::PromoteTarget => self.promote_target().await?,
                Action::RemoveCandidate => self.remove_candidate().await?,
                Action::KeepServing => self.keep_serving().await?,
                Action::ClearApproval => self.clear_annotation(ANNOTATION_APPROVE).await?,
                Action::ClearRetry => self.clear_annotation(ANNOTATION_RETRY).await?,
                Action::ClearAbort => self.clear_annotation(ANNOTATION_ABORT).await?,
                Action::Selection(a) => self.selection(a).await?,
                Action::Event {
                    type_,
                    reason,
                    message,
                } => self.event(*type_, reason.as_str(), message).await,
            }
        }
        Ok(())
    }

    /// Merge patches are recorded under the same field manager (as an Update, which takes
    /// no ownership that could later remove the user's fields).
    fn update_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.ctx.settings.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    fn target(&self, action: &'static str) -> Result<&'a Deployment> {
        self.fetched
            .target
            .as_ref()
            .ok_or(Error::TargetMissing { action })
    }

    /// Makes the experiment the controller owner, so garbage collection follows it.
    fn owned<K: Resource<DynamicType = ()>>(&self, mut obj: K) -> Result<K> {
        let owner = workload::experiment_owner_ref(self.exp)?;
        let refs = obj.meta_mut().owner_references.get_or_insert_with(Vec::new);
        if !refs.iter().any(|r| r.uid == owner.uid) {
            refs.push(owner);
        }
        obj.meta_mut().namespace = Some(self.ns.clone());
        Ok(obj)
    }

    /// Server-side applies `obj`, where `existing` is what was observed by its name: absent,
    /// or this experiment's — then the apply carries its UID, which the API server checks
    /// (`metadata.uid` is immutable), so an object replaced since is not overwritten. Someone
    /// else's is refused here. (Absent when read and created by someone in the instant before
    /// the apply is the one case no apply can tell: there is no create-only apply.)
    async fn apply<K>(&self, obj: K, existing: Option<&K>) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Serialize
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let mut obj = self.owned(obj)?;
        if let Some(existing) = existing {
            if !owned_by(existing, self.exp) {
                return Err(Error::NotOwned {
                    kind: K::kind(&()).to_string(),
                    name: existing.name_any(),
                });
            }
            obj.meta_mut().uid = existing.uid();
        }
        let api: Api<K> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let params = PatchParams::apply(&self.ctx.settings.field_manager).force();
        api.patch(&obj.name_any(), &params, &Patch::Apply(&obj))
            .await?;
        Ok(())
    }

    async fn ensure_candidate(&self, replicas: i32) -> Result<()> {
        let target = self.target("create the candidate")?;
        let candidate = workload::candidate_deployment(target, self.exp, replicas)?;
        self.apply(candidate, self.fetched.candidate.as_ref())
            .await?;
        if self.exp.spec.traffic.router.uses_route() {
            self.apply_service(self.candidate_service()?).await?;
        }
        Ok(())
    }

    async fn apply_service(&self, service: Service) -> Result<()> {
        let existing = service_named(self.fetched, &service.name_any());
        self.apply(service, existing).await
    }

    fn user_service(&self) -> Result<&'a Service> {
        self.fetched.service.as_ref().ok_or_else(|| {
            self.route_error("the Service it sends the target's traffic to was not found")
        })
    }

    fn candidate_service(&self) -> Result<Service> {
        let target = self.target("create the candidate Service")?;
        Ok(traffic::candidate_service(
            self.user_service()?,
            target,
            self.exp,
        )?)
    }

    fn baseline_service(&self) -> Result<Service> {
        let target = self.target("create the baseline Service")?;
        let hash = self.fetched.baseline_hash.as_deref().ok_or_else(|| {
            self.route_error("the target's current ReplicaSet (pod-template-hash) was not found")
        })?;
        Ok(traffic::baseline_service(
            self.user_service()?,
            target,
            self.exp,
            hash,
        )?)
    }

    async fn scale_target(&self, replicas: i32) -> Result<()> {
        let target = self.target("scale the target")?;
        self.merge_patch_target(target, json!({ "spec": { "replicas": replicas } }))
            .await
    }

    /// The target is the user's object: merge patches (recorded under our field manager)
    /// rather than server-side apply, so releasing a field never deletes it.
    async fn merge_patch_target(
        &self,
        target: &Deployment,
        patch: serde_json::Value,
    ) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        api.patch(
            &target.name_any(),
            &self.update_params(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(())
    }

    /// The promoted pod template replaces the whole template (a merge patch replaces lists), and
    /// carries the resourceVersion it was computed from, so a concurrent edit of the target is a
    /// conflict rather than silently overwritten.
    async fn promote_target(&self) -> Result<()> {
        let target = self.target("promote")?;
        let template = workload::promoted_template(
            target,
            self.exp.promoted_candidate(),
            self.exp.spec.container.as_deref(),
        )?;
        let patch = json!({
            "metadata": { "resourceVersion": target.resource_version() },
            "spec": { "template": template },
        });
        self.merge_patch_target(target, patch).await
    }

    /// Deletes the candidate Deployment and, for gatewayAPI, the variant Services — only those
    /// observed as this experiment's, each with a precondition on the UID it was observed with,
    /// so an object replaced meanwhile is never deleted (the API server answers 409). Background
    /// propagation returns at once; a 404 means it is already gone.
    async fn remove_candidate(&self) -> Result<()> {
        if let Some(candidate) = self.fetched.candidate.as_ref() {
            if owned_by(candidate, self.exp) {
                let deployments: Api<Deployment> =
                    Api::namespaced(self.ctx.client.clone(), &self.ns);
                let dp = delete_params(candidate);
                ignore_not_found(deployments.delete(&candidate.name_any(), &dp).await)?;
            }
        }
        // Found by owner, not by the user's Service: that one may no longer select the target.
        let services: Api<Service> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for variant in [workload::VARIANT_CANDIDATE, workload::VARIANT_BASELINE] {
            let of_variant = owned_services(self.exp, self.fetched).filter(|s| {
                s.labels().get(workload::LABEL_VARIANT).map(String::as_str) == Some(variant)
            });
            for service in of_variant {
                let dp = delete_params(service);
                ignore_not_found(services.delete(&service.name_any(), &dp).await)?;
            }
        }
        Ok(())
    }

    /// A one-shot annotation (approve, retry) was acted on: a merge patch setting it to null
    /// removes just that key. It is recorded as an Update, so the operator takes no ownership
    /// of the experiment's metadata (server-side apply would). A 404: the experiment is gone,
    /// and the annotation with it.
    async fn clear_annotation(&self, key: &str) -> Result<()> {
        let api: Api<ConcurrencyExperiment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let patch = json!({ "metadata": { "annotations": { key: null } } });
        ignore_not_found(
            api.patch(
                &self.exp.name_any(),
                &self.update_params(),
                &Patch::Merge(&patch),
            )
            .await,
        )
    }

    /// Events are best effort: a refused Event must not stop a rollback half way.
    async fn event(&self, type_: EventType, reason: &str, message: &str) {
        let type_ = match type_ {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        };
        let event = super::events::event(type_, reason, message);
        let reference = self.exp.object_ref(&());
        if let Err(e) = self.ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }
}

/// Background deletion of exactly the object observed: its UID is a precondition.
fn delete_params<K: Resource>(observed: &K) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: observed.uid(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    }
}

fn ignore_not_found<T>(r: std::result::Result<T, kube::Error>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
