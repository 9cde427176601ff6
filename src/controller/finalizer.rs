//! The experiment's finalizer: on just before the first write to the user's target or route,
//! off once a deletion has restored them. JSON patches with a `test` of what they change.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::{FIELD_MANAGER, FINALIZER};
use super::error::{is_invalid, is_not_found, Error, Result};
use crate::api::ConcurrencyExperiment;

/// What a finalizer patch did.
pub(super) enum FinalizerPatch {
    /// Written; the experiment as the API server stored it (its new resourceVersion guards the
    /// status write that follows).
    Applied(Box<ConcurrencyExperiment>),
    /// The experiment is gone (404).
    Gone,
    /// The finalizers changed since this copy was read (the cache lags our own previous patch,
    /// someone else wrote, or the experiment is being deleted and takes no new finalizer): a
    /// 422 from the patch's `test`; nothing done, look again with a fresh copy.
    Stale,
}

/// JSON patch with a `test` of the current list, so two writers never lose each other's
/// finalizers (a failed test is a 422 and the reconcile retries from a fresh read).
pub(super) async fn add(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
) -> Result<FinalizerPatch> {
    let patch = match &exp.meta().finalizers {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
        Some(current) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ]),
    };
    json_patch(api, exp, patch).await
}

/// As `add`; `Gone` is success here (an earlier release let the deletion finish).
pub(super) async fn remove(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
) -> Result<FinalizerPatch> {
    let finalizers = exp.finalizers();
    let Some(index) = finalizers.iter().position(|f| f == FINALIZER) else {
        return Ok(FinalizerPatch::Gone);
    };
    let patch = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]);
    json_patch(api, exp, patch).await
}

/// The finalizer patches carry a `test` of what they change, so two writers never drop each
/// other's finalizers; a failed test is the apiserver's 422 (500 experiments created at once
/// showed a few: a Deployment event reconciled a cached copy from before our own patch).
async fn json_patch(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
    patch: serde_json::Value,
) -> Result<FinalizerPatch> {
    let patch = serde_json::from_value(patch).map_err(|source| Error::Serialize {
        what: "finalizer patch",
        source,
    })?;
    let patched = api
        .patch(
            &exp.name_any(),
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            },
            &Patch::Json::<()>(patch),
        )
        .await;
    match patched {
        Ok(stored) => Ok(FinalizerPatch::Applied(Box::new(stored))),
        Err(e) if is_not_found(&e) => Ok(FinalizerPatch::Gone),
        Err(e) if is_invalid(&e) => {
            tracing::info!(experiment = %exp.name_any(), "finalizers changed meanwhile; looking again");
            Ok(FinalizerPatch::Stale)
        }
        Err(e) => Err(e.into()),
    }
}
