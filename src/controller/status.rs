//! Writing the stage machine's status: a minimal JSON merge patch on `/status`, guarded by the
//! resourceVersion it was computed from.
//!
//! A merge patch with just the new status would leave behind fields that became empty (they are
//! skipped when serialized), so the patch is the difference: changed values, and `null` for
//! what disappeared. On a 409 the experiment is read again; if only its spec or metadata moved,
//! the same status is re-diffed and written; if its status moved (someone else decided), this
//! decision is dropped and the next reconcile starts from what is stored.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value};

use super::error::{is_conflict, is_not_found, Error, Result};
use crate::api::{ConcurrencyExperiment, ConcurrencyExperimentStatus};

const ATTEMPTS: u32 = 3;

/// The merge patch that turns `old` into `new` (RFC 7386), `None` when they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

fn to_value(status: Option<&ConcurrencyExperimentStatus>) -> Result<Value> {
    match status {
        None => Ok(Value::Object(Map::new())),
        Some(s) => serde_json::to_value(s).map_err(|source| Error::Serialize {
            what: "status",
            source,
        }),
    }
}

/// The body sent to `/status`, or `None` when nothing changed.
pub fn status_patch(
    exp: &ConcurrencyExperiment,
    new: &ConcurrencyExperimentStatus,
) -> Result<Option<Value>> {
    let old = to_value(exp.status.as_ref())?;
    let Some(diff) = merge_diff(&old, &to_value(Some(new))?) else {
        return Ok(None);
    };
    Ok(Some(serde_json::json!({
        "metadata": { "resourceVersion": exp.resource_version() },
        "status": diff,
    })))
}

/// What happened to the status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Unchanged,
    Saved,
    /// The stored status changed under us; the decision was dropped.
    Superseded,
    /// The experiment is gone (deleted once its finalizer was released).
    Gone,
}

pub async fn write(
    api: &Api<ConcurrencyExperiment>,
    exp: &ConcurrencyExperiment,
    new: &ConcurrencyExperimentStatus,
    field_manager: &str,
) -> Result<Written> {
    let name = exp.name_any();
    let params = PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..PatchParams::default()
    };
    let mut current = exp.clone();
    for _ in 0..ATTEMPTS {
        let Some(patch) = status_patch(&current, new)? else {
            return Ok(Written::Unchanged);
        };
        match api
            .patch_status(&name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(Written::Saved),
            Err(e) if is_not_found(&e) => return Ok(Written::Gone),
            Err(e) if is_conflict(&e) => {
                let Some(fresh) = api.get_opt(&name).await? else {
                    return Ok(Written::Gone);
                };
                if fresh.status != exp.status {
                    return Ok(Written::Superseded);
                }
                current = fresh;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::StatusConflict { attempts: ATTEMPTS })
}
