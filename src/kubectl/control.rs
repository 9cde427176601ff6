//! `approve`, `abort`, `retry`, `pause`, `resume`: check the phase, then one merge patch.
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
use crate::api::{
    ConcurrencyExperiment, Phase, Promotion, ANNOTATION_ABORT, ANNOTATION_APPROVE, ANNOTATION_RETRY,
};
use crate::plan::{AWAITING_APPROVAL, AWAITING_EXTERNAL_PROMOTION, INCONCLUSIVE_LIMIT};

/// Reads and patches before giving up when the object keeps changing underneath.
const ATTEMPTS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Approve,
    Abort,
    Retry,
    Pause,
    Resume,
}

impl Control {
    pub fn verb(self) -> &'static str {
        match self {
            Control::Approve => "approve",
            Control::Abort => "abort",
            Control::Retry => "retry",
            Control::Pause => "pause",
            Control::Resume => "resume",
        }
    }
}

/// What a command does to the experiment as it stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Send this merge patch, then print the message.
    Patch { body: Value, message: String },
    /// Already requested: nothing to send.
    Nothing { message: String },
}

fn annotation(exp: &ConcurrencyExperiment, key: &str) -> Option<String> {
    exp.annotations().get(key).cloned()
}

fn is_true(v: Option<String>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
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

/// `Progressing at stage 2/3`, for refusals.
fn where_(exp: &ConcurrencyExperiment) -> String {
    let st = exp.status.clone().unwrap_or_default();
    match st.stage {
        Some(stage) if !st.phase.is_terminal() => format!("{} at stage {stage}", st.phase.as_str()),
        _ => st.phase.as_str().to_string(),
    }
}

/// Decides what `control` does to `exp`, or refuses in one sentence that says why and what
/// would work instead.
pub fn plan(control: Control, exp: &ConcurrencyExperiment) -> Result<Plan, PluginError> {
    let name = exp.name_any();
    let st = exp.status.clone().unwrap_or_default();
    let phase = st.phase;
    let refuse = |why: String| Err(PluginError::Refused(format!("{name}: {why}")));
    match control {
        Control::Approve => {
            if st.hold_reason.as_deref() == Some(AWAITING_EXTERNAL_PROMOTION) {
                return refuse(format!(
                    "is held for Git ({AWAITING_EXTERNAL_PROMOTION}): with promotion: external \
                     the commit promotes, never an approval — `kubectl concurrency get {name}` \
                     shows the patch to commit"
                ));
            }
            let held = phase == Phase::Paused && st.hold_reason.is_some();
            let last = i64::try_from(exp.spec.stages.len()).unwrap_or(i64::MAX) - 1;
            let at_gate = exp.spec.promotion == Promotion::Manual
                && matches!(phase, Phase::Progressing | Phase::Paused)
                && st.stage_index.map(i64::from) == Some(last);
            if !held && !at_gate {
                return refuse(if phase == Phase::Paused {
                    "paused by spec.paused, not held for approval; `kubectl concurrency resume` \
                     continues it"
                        .to_string()
                } else {
                    format!(
                        "is {}; approve lifts a hold (phase Paused with holdReason {INCONCLUSIVE_LIMIT} \
                         or {AWAITING_APPROVAL}) or the manual promotion at the last stage — \
                         nothing to approve",
                        where_(exp)
                    )
                });
            }
            if st.approve_annotation_consumed {
                return refuse(
                    "the previous approval is still being removed by the operator; try again in \
                     a few seconds"
                        .into(),
                );
            }
            let what = match st.hold_reason.as_deref() {
                Some(INCONCLUSIVE_LIMIT) => {
                    "lifts the inconclusive hold (the count starts again)".to_string()
                }
                Some(AWAITING_APPROVAL) if exp.spec.paused => {
                    "promotes once spec.paused is lifted (`kubectl concurrency resume`)".to_string()
                }
                Some(AWAITING_APPROVAL) => "promotes the candidate into the target".to_string(),
                _ if exp.spec.paused => {
                    "promotes when the last stage has passed and spec.paused is lifted".to_string()
                }
                _ => "promotes when the last stage has passed".to_string(),
            };
            if is_true(annotation(exp, ANNOTATION_APPROVE)) {
                return Ok(Plan::Nothing {
                    message: format!(
                        "{name}: already approved ({ANNOTATION_APPROVE}=true); the operator {what}"
                    ),
                });
            }
            Ok(Plan::Patch {
                body: annotations_patch(exp, &[(ANNOTATION_APPROVE, Some("true"))]),
                message: format!(
                    "{name}: approved ({ANNOTATION_APPROVE}=true); the operator {what} and removes \
                     the annotation"
                ),
            })
        }
        Control::Abort => {
            if !matches!(phase, Phase::Pending | Phase::Progressing | Phase::Paused) {
                return refuse(match phase {
                    Phase::Promoting => {
                        "is Promoting: too late to abort, the target may already run the candidate \
                         config"
                            .to_string()
                    }
                    Phase::RollingBack => "is already rolling back".to_string(),
                    _ => format!("is {}: nothing to abort", phase.as_str()),
                });
            }
            if is_true(annotation(exp, ANNOTATION_ABORT)) || exp.spec.abort {
                return Ok(Plan::Nothing {
                    message: format!("{name}: abort already requested; the operator rolls back"),
                });
            }
            Ok(Plan::Patch {
                body: annotations_patch(exp, &[(ANNOTATION_ABORT, Some("true"))]),
                message: format!(
                    "{name}: abort requested ({ANNOTATION_ABORT}=true); the operator restores the \
                     baseline, then removes the candidate"
                ),
            })
        }
        Control::Retry => {
            if phase != Phase::RolledBack {
                return refuse(format!(
                    "is {}; only a RolledBack experiment can be retried",
                    where_(exp)
                ));
            }
            if exp.spec.abort {
                return refuse(
                    "spec.abort is true, so a retry would roll back at once; set it to false first"
                        .into(),
                );
            }
            if is_true(annotation(exp, ANNOTATION_RETRY)) {
                return Ok(Plan::Nothing {
                    message: format!("{name}: retry already requested; the operator starts again"),
                });
            }
            // A leftover abort annotation would roll the retried experiment back at once.
            let mut set = vec![(ANNOTATION_RETRY, Some("true"))];
            if annotation(exp, ANNOTATION_ABORT).is_some() {
                set.push((ANNOTATION_ABORT, None));
            }
            Ok(Plan::Patch {
                body: annotations_patch(exp, &set),
                message: format!(
                    "{name}: retry requested ({ANNOTATION_RETRY}=true); the operator starts again \
                     at stage 1 and removes the annotation"
                ),
            })
        }
        Control::Pause => {
            if !matches!(phase, Phase::Pending | Phase::Progressing) {
                return refuse(match phase {
                    Phase::Paused => match st.hold_reason {
                        Some(h) if !exp.spec.paused => format!("is already Paused ({h})"),
                        _ => "is already Paused".into(),
                    },
                    _ => format!(
                        "is {}; only a Pending or Progressing experiment can be paused",
                        phase.as_str()
                    ),
                });
            }
            if exp.spec.paused {
                return Ok(Plan::Nothing {
                    message: format!("{name}: already paused (spec.paused is true)"),
                });
            }
            Ok(Plan::Patch {
                body: paused_patch(exp, true),
                message: format!(
                    "{name}: paused (spec.paused: true) at stage {}; analyses keep running and \
                     can still roll back",
                    st.stage.as_deref().unwrap_or("1")
                ),
            })
        }
        Control::Resume => {
            if !exp.spec.paused || phase.is_terminal() {
                return refuse(match (phase, st.hold_reason) {
                    (p, _) if p.is_terminal() => format!("is {}: nothing to resume", p.as_str()),
                    (Phase::Paused, Some(h)) => format!(
                        "is held ({h}), not paused by spec.paused; `kubectl concurrency approve` \
                         lifts the hold"
                    ),
                    _ => format!("is {} and not paused (spec.paused is false)", where_(exp)),
                });
            }
            Ok(Plan::Patch {
                body: paused_patch(exp, false),
                message: format!("{name}: resumed (spec.paused: false)"),
            })
        }
    }
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
