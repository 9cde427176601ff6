//! `approve`, `abort`, `retry`, `pause`, `resume`: ask the plan what the control does now
//! (`plan::controls`, the stage machine's own rules), then one merge patch.
//!
//! approve/abort/retry set the operator's one-shot annotations (it removes them once acted
//! on); pause/resume set `spec.paused`. The patch carries the `resourceVersion` the phase was
//! read at, so a phase that changed in between is a conflict — read again and decide again —
//! rather than, say, an abort annotation landing on an experiment that just succeeded.

use std::io::Write;

use kube::api::{Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Map, Value};

use super::{api_error, Op, PluginError, Session};
use crate::api::{ConcurrencyExperiment, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY};
pub use crate::plan::controls::Control;
use crate::plan::controls::{answer, Answer};

/// Reads and patches before giving up when the object keeps changing underneath.
const ATTEMPTS: usize = 3;

/// What a command does to the experiment as it stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Send this merge patch, then print the message.
    Patch { body: Value, message: String },
    /// Already requested: nothing to send.
    Nothing { message: String },
}

/// A merge patch of `metadata.annotations` (null removes one) guarded by the resourceVersion.
fn annotations_patch(exp: &ConcurrencyExperiment, set: &[(&str, Option<&str>)]) -> Value {
    let annotations: Map<String, Value> = set
        .iter()
        .map(|(k, v)| (k.to_string(), v.map_or(Value::Null, |v| json!(v))))
        .collect();
    json!({"metadata": guarded(exp, Some(Value::Object(annotations)))})
}

fn paused_patch(exp: &ConcurrencyExperiment, paused: bool) -> Value {
    json!({"metadata": guarded(exp, None), "spec": {"paused": paused}})
}

/// `metadata` with the resourceVersion the decision was made on (a 409 if it moved on).
fn guarded(exp: &ConcurrencyExperiment, annotations: Option<Value>) -> Value {
    let mut meta = Map::new();
    if let Some(rv) = exp.resource_version() {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    if let Some(a) = annotations {
        meta.insert("annotations".into(), a);
    }
    Value::Object(meta)
}

/// What `control` does to `exp` — as the stage machine will act on it (`plan::controls`) —
/// as a patch and what to print, or a refusal in one sentence that says why and what would
/// work instead.
pub fn plan(control: Control, exp: &ConcurrencyExperiment) -> Result<Plan, PluginError> {
    let name = exp.name_any();
    let st = exp.status.clone().unwrap_or_default();
    let what = match answer(control, exp) {
        Answer::Refused(why) => return Err(PluginError::Refused(format!("{name}: {why}"))),
        Answer::Asked(what) => {
            let message = match control {
                Control::Approve => {
                    format!(
                        "{name}: already approved ({ANNOTATION_APPROVE}=true); the operator {what}"
                    )
                }
                Control::Pause => format!("{name}: already paused (spec.paused is true)"),
                Control::Abort | Control::Retry | Control::Resume => format!(
                    "{name}: {} already requested; the operator {what}",
                    control.verb()
                ),
            };
            return Ok(Plan::Nothing { message });
        }
        Answer::Does(what) => what,
    };
    Ok(match control {
        Control::Approve => Plan::Patch {
            body: annotations_patch(exp, &[(ANNOTATION_APPROVE, Some("true"))]),
            message: format!(
                "{name}: approved ({ANNOTATION_APPROVE}=true); the operator {what} and removes \
                 the annotation"
            ),
        },
        Control::Abort => Plan::Patch {
            body: annotations_patch(exp, &[(ANNOTATION_ABORT, Some("true"))]),
            message: format!(
                "{name}: abort requested ({ANNOTATION_ABORT}=true); the operator {what}"
            ),
        },
        Control::Retry => {
            // A leftover abort annotation would roll the retried experiment back at once.
            let mut set = vec![(ANNOTATION_RETRY, Some("true"))];
            if exp.annotations().contains_key(ANNOTATION_ABORT) {
                set.push((ANNOTATION_ABORT, None));
            }
            Plan::Patch {
                body: annotations_patch(exp, &set),
                message: format!(
                    "{name}: retry requested ({ANNOTATION_RETRY}=true); the operator {what} and \
                     removes the annotation"
                ),
            }
        }
        Control::Pause => Plan::Patch {
            body: paused_patch(exp, true),
            message: format!(
                "{name}: paused (spec.paused: true) at stage {}; the operator {what}",
                st.stage.as_deref().unwrap_or("1")
            ),
        },
        Control::Resume => Plan::Patch {
            body: paused_patch(exp, false),
            message: format!("{name}: resumed (spec.paused: false); the operator {what}"),
        },
    })
}

pub async fn run(
    session: &Session,
    control: Control,
    name: &str,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let api = session.experiments();
    for _ in 0..ATTEMPTS {
        let exp = session.experiment(name).await?;
        let (body, message) = match plan(control, &exp)? {
            Plan::Nothing { message } => {
                writeln!(out, "{message}")?;
                return Ok(());
            }
            Plan::Patch { body, message } => (body, message),
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {
                writeln!(out, "{message}")?;
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => continue,
            Err(e) => {
                return Err(api_error(
                    e,
                    Op::experiment("patch", Some(name), &session.namespace),
                ))
            }
        }
    }
    Err(PluginError::Conflict {
        name: name.to_string(),
        attempts: ATTEMPTS,
    })
}
