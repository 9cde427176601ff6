//! The gatewayAPI router's writes to the user's HTTPRoute: a stage's or a selection's split as a
//! JSON merge patch of just the backendRefs (the user owns the route), only once every Service
//! that would start receiving traffic has a ready endpoint (a Gateway answers 500 for a
//! backendRef it cannot resolve), and the original refs restored at the end.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DynamicObject, ListParams, Patch};
use kube::{Api, ResourceExt};

use super::super::error::{Error, Result};
use super::super::observe::fetch::http_route_resource;
use super::super::observe::observations::owned_services;
use super::super::observe::variants::ServiceNames;
use super::Actor;
use crate::traffic;

impl<'a> Actor<'a> {
    pub(super) fn route_error(&self, reason: &str) -> Error {
        Error::Route {
            name: self.exp.spec.traffic.http_route.clone().unwrap_or_default(),
            reason: reason.to_string(),
        }
    }

    pub(super) fn route(&self) -> Result<&'a serde_json::Value> {
        self.fetched
            .route
            .as_ref()
            .ok_or_else(|| self.route_error("not found"))
    }

    /// The patch carries the route's resourceVersion (see `traffic`), so a concurrent edit
    /// is a conflict and the next reconcile recomputes from a fresh read.
    pub(super) async fn patch_route(&self, patch: serde_json::Value) -> Result<()> {
        let name = self.exp.spec.traffic.http_route.clone().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), &self.ns, &http_route_resource());
        api.patch(&name, &self.update_params(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// A stage's split; with a fresh baseline beside the candidate, its Service gets
    /// `fresh` percent (it is applied with the fresh baseline's Deployment).
    pub(super) async fn set_route_weights(&self, candidate_weight: i32, fresh: i32) -> Result<()> {
        let baseline = self.baseline_service()?;
        let candidate = self.candidate_service()?;
        let (baseline_name, candidate_name) = (baseline.name_any(), candidate.name_any());
        self.apply_service(baseline).await?;
        self.apply_service(candidate).await?;
        let (c, f) = (candidate_weight.clamp(0, 100), fresh.max(0));
        let names = ServiceNames::new(
            self.exp,
            &self.fetched.services,
            self.fetched.service.as_ref(),
        );
        let fresh_name = names.map(|n| n.fresh_baseline).unwrap_or_default();
        let mut backends = vec![
            (baseline_name.as_str(), (100 - c - f).max(0)),
            (candidate_name.as_str(), c),
        ];
        if f > 0 {
            backends.push((fresh_name.as_str(), f));
        }
        self.patch_route_split(&backends).await
    }

    /// Splits the route between `backends`, replacing the refs to any Service of this
    /// experiment: after a selection, stage 1's split replaces the selection's.
    /// Every Service name the experiment made or would make: what a split replaces and a
    /// restore removes.
    fn our_services(&self) -> Vec<String> {
        let mut ours: Vec<String> = owned_services(self.exp, self.fetched)
            .map(|s| s.name_any())
            .collect();
        if let Some(names) = ServiceNames::new(
            self.exp,
            &self.fetched.services,
            self.fetched.service.as_ref(),
        ) {
            ours.extend([names.baseline, names.candidate, names.fresh_baseline]);
            ours.extend(names.candidates);
        }
        ours
    }

    pub(super) async fn patch_route_split(&self, backends: &[(&str, i32)]) -> Result<()> {
        let ours = self.our_services();
        let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
        let route = self.route()?;
        let waiting = self
            .without_endpoints(&traffic::newly_weighted(route, backends))
            .await?;
        if !waiting.is_empty() {
            // Not an error: the next reconcile (AFTER_WRITE) asks again, by then with slices.
            tracing::info!(
                experiment = %self.exp.name_any(),
                services = ?waiting,
                "route not shifted yet: Services without ready endpoints"
            );
            return Ok(());
        }
        let user = self.user_service()?.name_any();
        let patch = traffic::split_route_patch(route, &user, &ours, backends)?;
        self.patch_route(patch).await
    }

    /// Of `services`, those without a ready endpoint in their EndpointSlices. Listed only when
    /// a split would start sending to a Service (a stage's first shift, a selection's start),
    /// never per reconcile. `ready` unset counts as ready, as the API documents.
    pub(super) async fn without_endpoints(&self, services: &[String]) -> Result<Vec<String>> {
        let slices: Api<EndpointSlice> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let mut waiting = Vec::new();
        for name in services {
            let params =
                ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
            let list = slices.list(&params).await?;
            let ready = list.items.iter().flat_map(|s| &s.endpoints).any(|e| {
                !e.addresses.is_empty()
                    && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
            });
            if !ready {
                waiting.push(name.clone());
            }
        }
        Ok(waiting)
    }

    pub(super) async fn restore_route(&self) -> Result<()> {
        let Some(route) = self.fetched.route.as_ref() else {
            // Nothing to restore on a route that no longer exists.
            return Ok(());
        };
        let original = self
            .original_route
            .ok_or_else(|| self.route_error("its original backendRefs were never saved"))?;
        let ours = self.our_services();
        let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
        let user = self.user_service()?.name_any();
        let patch = traffic::restore_route_patch(route, original, &user, &ours)?;
        self.patch_route(patch).await
    }
}
