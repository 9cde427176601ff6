//! A selection's actions (docs/selection.md): its candidates' and the fresh baseline's
//! Deployments and Services, server-side applied with the one field manager and owned by the
//! experiment like the candidate's; the N-way route split; and their removal — the Service
//! first (its route weight is already 0), then the pods, so a removal cut short is seen again
//! by its Deployment and finished.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::{Api, ResourceExt};

use super::super::error::Result;
use super::super::observe::owner::owned_by;
use super::super::observe::variants::ServiceNames;
use super::{delete_params, ignore_not_found, Actor};
use crate::plan::SelectionAction;
use crate::{traffic, workload};

impl Actor<'_> {
    pub(super) async fn selection(&self, action: &SelectionAction) -> Result<()> {
        match action {
            SelectionAction::EnsureVariant { index, replicas } => {
                self.ensure_variant(*index, *replicas).await
            }
            SelectionAction::EnsureFreshBaseline { replicas } => {
                self.ensure_fresh_baseline(*replicas).await
            }
            SelectionAction::SetWeights {
                candidates,
                fresh_baseline,
            } => self.set_weights(candidates, *fresh_baseline).await,
            SelectionAction::RemoveVariant { index } => {
                let label = workload::variant_label(*index);
                let observed = self.fetched.variants.candidates.get(*index);
                self.remove_variant(observed.and_then(Option::as_ref), &[&label])
                    .await
            }
            SelectionAction::RemoveFreshBaseline => {
                // Without a candidate (a selection rolled back) the split's baseline Service
                // goes with it; a candidate's removal takes it otherwise, once the route is
                // back (at 100 % the route still names it, at weight 0).
                let observed = self.fetched.variants.fresh_baseline.as_ref();
                let candidate = self.fetched.candidate.as_ref();
                let labels: &[&str] = match candidate.filter(|c| owned_by(*c, self.exp)) {
                    Some(_) => &[workload::VARIANT_FRESH_BASELINE],
                    None => &[workload::VARIANT_FRESH_BASELINE, workload::VARIANT_BASELINE],
                };
                self.remove_variant(observed, labels).await
            }
        }
    }

    async fn ensure_variant(&self, index: usize, replicas: i32) -> Result<()> {
        let target = self.target("create a selection's candidate")?;
        let d = workload::selection_variant_deployment(target, self.exp, index, replicas)?;
        let observed = self.fetched.variants.candidates.get(index);
        self.apply(d, observed.and_then(Option::as_ref)).await?;
        if self.exp.spec.traffic.router.uses_route() {
            let user = self.user_service()?;
            let service = traffic::selection_variant_service(user, target, self.exp, index)?;
            self.apply_service(service).await?;
        }
        Ok(())
    }

    async fn ensure_fresh_baseline(&self, replicas: i32) -> Result<()> {
        let target = self.target("create the fresh baseline")?;
        let d = workload::fresh_baseline_deployment(target, self.exp, replicas)?;
        self.apply(d, self.fetched.variants.fresh_baseline.as_ref())
            .await?;
        if self.exp.spec.traffic.router.uses_route() {
            let user = self.user_service()?;
            let service = traffic::fresh_baseline_service(user, target, self.exp)?;
            self.apply_service(service).await?;
        }
        Ok(())
    }

    /// The route split N ways: each listed candidate and the fresh baseline their percent,
    /// the target's own pods (the pinned baseline Service) the rest. An eliminated candidate
    /// is not listed, so its ref goes and its traffic returns to the baseline.
    async fn set_weights(&self, candidates: &[(usize, i32)], fresh: i32) -> Result<()> {
        let baseline = self.baseline_service()?;
        let baseline_name = baseline.name_any();
        self.apply_service(baseline).await?;
        let names = ServiceNames::new(
            self.exp,
            &self.fetched.services,
            self.fetched.service.as_ref(),
        )
        .ok_or_else(|| {
            self.route_error("the Service it sends the target's traffic to was not found")
        })?;
        let mut backends: Vec<(&str, i32)> = vec![(names.fresh_baseline.as_str(), fresh)];
        for (i, w) in candidates {
            if let Some(name) = names.candidates.get(*i) {
                backends.push((name.as_str(), *w));
            }
        }
        let rest = 100 - backends.iter().map(|(_, w)| *w).sum::<i32>();
        backends.insert(0, (baseline_name.as_str(), rest.max(0)));
        self.patch_route_split(&backends).await
    }

    /// Deletes the Services of `labels` (found by owner and label) and then the Deployment when
    /// observed as this experiment's, each with a precondition on the UID it was observed with.
    async fn remove_variant(&self, observed: Option<&Deployment>, labels: &[&str]) -> Result<()> {
        let services: Api<Service> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let of_variant = self.fetched.services.iter().filter(|s| {
            let label = s.labels().get(workload::LABEL_VARIANT).map(String::as_str);
            owned_by(*s, self.exp) && label.is_some_and(|l| labels.contains(&l))
        });
        for service in of_variant {
            let dp = delete_params(service);
            ignore_not_found(services.delete(&service.name_any(), &dp).await)?;
        }
        if let Some(d) = observed.filter(|d| owned_by(*d, self.exp)) {
            let deployments: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
            ignore_not_found(deployments.delete(&d.name_any(), &delete_params(d)).await)?;
        }
        Ok(())
    }
}
