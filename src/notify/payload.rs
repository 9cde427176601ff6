//! The two bodies a notification is sent as: the generic webhook's JSON (documented field by
//! field in docs/notifications.md, versioned by `version`) and a Slack-compatible incoming
//! webhook message (`text` + one `attachments` entry, which Slack, Mattermost, Rocket.Chat and
//! Discord's `/slack` endpoint all render).

use serde_json::{json, Value};

use super::{Kind, Notification};

/// Bumped on any incompatible change of the webhook body.
pub const PAYLOAD_VERSION: &str = "concurrency.dev/notification/v1";

/// Optional Slack settings (Mattermost and older Slack webhooks honour them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlackOptions {
    pub username: Option<String>,
    pub channel: Option<String>,
}

/// The generic webhook body. `cluster` names the cluster when one operator's receiver hears
/// several.
pub fn webhook_body(n: &Notification, cluster: Option<&str>) -> Value {
    let stage = n.stage.as_ref().map(|s| {
        json!({
            "index": s.index,
            "number": s.index + 1,
            "count": s.count,
            "plannedWeight": s.planned_weight,
            "effectiveWeight": s.effective_weight,
        })
    });
    let decision = n.decision.as_ref().map(|d| {
        json!({
            "action": match d.action {
                crate::api::DecisionAction::Promote => "Promote",
                crate::api::DecisionAction::Rollback => "Rollback",
            },
            "reason": d.reason,
            "message": d.message,
            "at": d.at.0.to_string(),
        })
    });
    let checks: Vec<Value> = n
        .checks
        .iter()
        .map(|c| {
            json!({
                "name": c.result.name,
                "verdict": c.result.verdict.as_str(),
                "baseline": c.result.baseline,
                "candidate": c.result.candidate,
                "baselineDisplay": c.baseline,
                "candidateDisplay": c.candidate,
                "limit": c.result.limit,
                "reason": c.result.reason,
            })
        })
        .collect();
    json!({
        "version": PAYLOAD_VERSION,
        "id": n.id,
        "kind": n.kind.as_str(),
        "severity": n.kind.severity().as_str(),
        "timestamp": n.at.to_string(),
        "cluster": cluster,
        "experiment": {"namespace": n.namespace, "name": n.name, "uid": n.uid},
        "target": {"kind": "Deployment", "name": n.target},
        "phase": n.phase.as_str(),
        "stage": stage,
        "baseline": n.baseline,
        "candidate": n.candidate,
        "reason": n.reason,
        "message": n.message,
        "decision": decision,
        "checks": checks,
        "text": headline(n),
    })
}

/// The Slack-compatible message: the headline as `text`, the machine's sentence and the facts
/// in an attachment coloured by outcome.
pub fn slack_body(n: &Notification, options: &SlackOptions, cluster: Option<&str>) -> Value {
    let mut fields = vec![
        field("Target", format!("Deployment {}", n.target), true),
        field("Phase", n.phase.as_str().to_string(), true),
    ];
    if let Some(s) = &n.stage {
        let weights = format!(
            "{}/{} — {}% planned, {}% in force",
            s.index + 1,
            s.count,
            s.planned_weight,
            s.effective_weight
        );
        fields.push(field("Stage", weights, true));
    }
    fields.push(field("Reason", n.reason.clone(), true));
    if let Some(b) = &n.baseline {
        fields.push(field("Baseline", b.clone(), true));
    }
    fields.push(field("Candidate", n.candidate.clone(), true));
    for c in &n.checks {
        let mark = match c.result.verdict {
            crate::api::Verdict::Pass => "✓",
            crate::api::Verdict::Fail => "✗",
            crate::api::Verdict::Inconclusive => "?",
        };
        let mut value = format!(
            "baseline {} / candidate {} — limit {}",
            c.baseline, c.candidate, c.result.limit
        );
        if let Some(r) = &c.result.reason {
            value.push_str(&format!(" ({r})"));
        }
        let title = format!("{mark} {} {}", c.result.name, c.result.verdict.as_str());
        fields.push(field(&title, value, false));
    }
    let footer = match cluster {
        Some(c) => format!("concurrency-operator · {c}"),
        None => "concurrency-operator".to_string(),
    };
    let mut body = json!({
        "text": format!("{} {}", emoji(n.kind), escape(&headline(n))),
        "attachments": [{
            "color": color(n.kind),
            "fallback": headline(n),
            "title": format!("{}/{}", n.namespace, n.name),
            "text": escape(&n.message),
            "fields": fields,
            "footer": footer,
            "ts": n.at.as_second(),
        }],
    });
    if let (Some(u), Some(obj)) = (&options.username, body.as_object_mut()) {
        obj.insert("username".into(), json!(u));
    }
    if let (Some(c), Some(obj)) = (&options.channel, body.as_object_mut()) {
        obj.insert("channel".into(), json!(c));
    }
    body
}

fn field(title: &str, value: String, short: bool) -> Value {
    json!({"title": escape(title), "value": escape(&value), "short": short})
}

/// Slack reads `<…>` as links and mentions and `&` as the start of an entity: the three are
/// escaped in every text taken from the experiment (Slack's documented escaping).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line that says what happened and what it means for the target.
pub fn headline(n: &Notification) -> String {
    let who = format!("{}/{}", n.namespace, n.name);
    let stage = n
        .stage
        .as_ref()
        .map(|s| format!("{}/{}", s.index + 1, s.count))
        .unwrap_or_default();
    let weight = n.stage.as_ref().map_or(0, |s| s.planned_weight);
    let baseline = n.baseline.as_deref().unwrap_or("its current config");
    match n.kind {
        Kind::Started => format!(
            "{who}: canary {} — stage {stage}, {weight}% of traffic to {} (baseline {baseline})",
            if n.reason == "SpecChanged" {
                "restarted with an edited candidate"
            } else {
                "started"
            },
            n.candidate
        ),
        Kind::StageAdvanced => format!(
            "{who}: advanced to stage {stage}, {weight}% of traffic to {}",
            n.candidate
        ),
        Kind::AwaitingApproval => format!(
            "{who}: all stages passed — waiting for approval to promote {}",
            n.candidate
        ),
        Kind::Paused => format!(
            "{who}: paused at stage {stage} ({}) — approve to go on, or abort",
            n.reason
        ),
        Kind::RolledBack => format!(
            "{who}: rolled back ({}) — Deployment {} runs {baseline} again",
            n.reason, n.target
        ),
        Kind::Promoted => format!(
            "{who}: promoted — Deployment {} now runs {}",
            n.target, n.candidate
        ),
        Kind::Invalid => format!("{who}: invalid — the experiment cannot run"),
    }
}

fn color(kind: Kind) -> &'static str {
    match kind {
        Kind::Promoted => "good",
        Kind::Started | Kind::StageAdvanced => "#439FE0",
        Kind::AwaitingApproval | Kind::Paused => "warning",
        Kind::RolledBack | Kind::Invalid => "danger",
    }
}

fn emoji(kind: Kind) -> &'static str {
    match kind {
        Kind::Started => ":rocket:",
        Kind::StageAdvanced => ":arrow_forward:",
        Kind::AwaitingApproval => ":raised_hand:",
        Kind::Paused => ":pause_button:",
        Kind::RolledBack => ":rewind:",
        Kind::Promoted => ":white_check_mark:",
        Kind::Invalid => ":x:",
    }
}
