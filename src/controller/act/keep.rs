//! `Action::KeepServing`: a deletion released without the baseline restored lets go of the
//! experiment's Deployments that still serve (their owner reference to it removed), so garbage
//! collection does not take the only ready pods with the experiment. They are annotated with
//! the experiment's name for the person who removes them once the target is ready.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Patch;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{ignore_not_found, Actor};
use crate::controller::error::{is_invalid, Result};
use crate::controller::observe::owner::owned_by;

/// Names the experiment a let-go Deployment came from.
pub const ANNOTATION_KEPT_FROM: &str = "concurrency.dev/kept-from";

impl Actor<'_> {
    pub(super) async fn keep_serving(&self) -> Result<()> {
        let variants = &self.fetched.variants;
        let serving = self
            .fetched
            .candidate
            .iter()
            .chain(variants.candidates.iter().flatten())
            .chain(variants.fresh_baseline.iter())
            .filter(|d| owned_by(*d, self.exp))
            .filter(|d| {
                d.status
                    .as_ref()
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0)
                    > 0
            });
        let api: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for d in serving {
            let uid = self.exp.uid().unwrap_or_default();
            let others: Vec<_> = d
                .owner_references()
                .iter()
                .filter(|r| r.uid != uid)
                .cloned()
                .collect();
            // A JSON patch tested against the UID it was observed with: a Deployment replaced
            // meanwhile is refused (422), never edited.
            let patch = serde_json::from_value(json!([
                {"op": "test", "path": "/metadata/uid", "value": d.uid()},
                {"op": "replace", "path": "/metadata/ownerReferences", "value": others},
                {"op": "add", "path": "/metadata/annotations", "value": annotations(d, &self.exp.name_any())},
            ]))
            .map_err(|source| crate::controller::error::Error::Serialize {
                what: "the patch letting a serving Deployment go",
                source,
            })?;
            let patched = api
                .patch(
                    &d.name_any(),
                    &self.update_params(),
                    &Patch::Json::<()>(patch),
                )
                .await;
            match patched {
                // Replaced meanwhile (the `test` failed): not the experiment's to let go of.
                Err(e) if is_invalid(&e) => continue,
                other => ignore_not_found(other)?,
            }
            tracing::warn!(
                deployment = %d.name_any(),
                experiment = %self.exp.name_any(),
                "kept serving after the experiment's deletion; no longer owned by it"
            );
        }
        Ok(())
    }
}

/// The Deployment's annotations with `concurrency.dev/kept-from` added (the JSON patch sets
/// the whole map: `add` on a missing map would fail, on an existing one replaces it).
fn annotations(d: &Deployment, experiment: &str) -> std::collections::BTreeMap<String, String> {
    let mut a = d.annotations().clone();
    a.insert(ANNOTATION_KEPT_FROM.to_string(), experiment.to_string());
    a
}
