//! The change an `external` promotion asks a person (or their GitOps repository) to make.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The candidate config as a change to the target's manifest, ready to commit. Made by
/// `workload::promotion_patch` from the same rendering the candidate Deployment gets.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PromotionPatch {
    /// The app container the patch changes.
    pub container: String,
    /// One line for people: `set RAILS_MAX_THREADS=4, PUMA_MAX_THREADS=4 on container web`.
    pub summary: String,
    /// A strategic merge patch of the target Deployment, as YAML: containers and env entries
    /// merge by name (a Kustomize `patches:` entry, or `kubectl patch` for a trial), and the
    /// lines under `containers` are what to write into the manifest by hand.
    pub strategic_merge_patch: String,
}
