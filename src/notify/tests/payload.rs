//! Golden bodies: what a receiver gets, field by field (docs/notifications.md shows the same).

use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::*;
use crate::api::Phase;
use crate::notify::{derive, headline, slack_body, webhook_body, Kind, Notification, SlackOptions};
use crate::plan::EventType;

const ROLLED_BACK: &str = "Rolled back: the baseline serves all traffic. Rolling back: 1 failed \
     analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).";

fn rollback() -> Notification {
    let actions = [event(EventType::Warning, "RolledBack", ROLLED_BACK)];
    derive(&experiment(), &rolled_back(), &actions, now()).remove(0)
}

fn advance() -> Notification {
    let st = status(Phase::Progressing, 1, 70, 33);
    let msg = "Advancing to stage 2/3: 70% of traffic to the candidate (puma 1×1).";
    let actions = [event(EventType::Normal, "StageAdvanced", msg)];
    derive(&experiment(), &st, &actions, now()).remove(0)
}

#[test]
fn the_webhook_body_of_a_rollback() {
    assert_eq!(
        webhook_body(&rollback(), Some("prod-eu")),
        json!({
            "version": "concurrency.dev/notification/v1",
            "id": format!("{UID}/RolledBack/0/2026-12-01T04:44:40Z"),
            "kind": "RolledBack",
            "severity": "warning",
            "timestamp": "2026-12-01T04:44:40Z",
            "cluster": "prod-eu",
            "experiment": {"namespace": "shop", "name": "storefront-threads", "uid": UID},
            "target": {"kind": "Deployment", "name": "storefront"},
            "phase": "RolledBack",
            "stage": {"index": 0, "number": 1, "count": 3, "plannedWeight": 30, "effectiveWeight": 0},
            "baseline": "puma 2×6",
            "candidate": "puma 1×1",
            "reason": "CheckFailed",
            "message": ROLLED_BACK,
            "decision": {
                "action": "Rollback",
                "reason": "CheckFailed",
                "message": ROLLBACK_MESSAGE,
                "at": "2026-12-01T04:44:39Z",
            },
            "checks": [{
                "name": "queueTime",
                "verdict": "Fail",
                "baseline": 0.0017,
                "candidate": 0.4592,
                "baselineDisplay": "1.7ms",
                "candidateDisplay": "459.2ms",
                "limit": "max 50ms",
                "reason": "candidate 459.2ms is above max 50ms",
            }],
            "text": "shop/storefront-threads: rolled back (CheckFailed) — Deployment storefront runs puma 2×6 again",
        })
    );
}

#[test]
fn the_webhook_body_of_a_stage_advance() {
    assert_eq!(
        webhook_body(&advance(), None),
        json!({
            "version": "concurrency.dev/notification/v1",
            "id": format!("{UID}/StageAdvanced/1/2026-12-01T04:44:40Z"),
            "kind": "StageAdvanced",
            "severity": "info",
            "timestamp": "2026-12-01T04:44:40Z",
            "cluster": null,
            "experiment": {"namespace": "shop", "name": "storefront-threads", "uid": UID},
            "target": {"kind": "Deployment", "name": "storefront"},
            "phase": "Progressing",
            "stage": {"index": 1, "number": 2, "count": 3, "plannedWeight": 70, "effectiveWeight": 33},
            "baseline": "puma 2×6",
            "candidate": "puma 1×1",
            "reason": "StageAdvanced",
            "message": "Advancing to stage 2/3: 70% of traffic to the candidate (puma 1×1).",
            "decision": null,
            "checks": [],
            "text": "shop/storefront-threads: advanced to stage 2/3, 70% of traffic to puma 1×1",
        })
    );
}

#[test]
fn the_slack_message_of_a_rollback() {
    let options = SlackOptions {
        username: Some("canary".into()),
        channel: Some("#deploys".into()),
    };
    assert_eq!(
        slack_body(&rollback(), &options, Some("prod-eu")),
        json!({
            "username": "canary",
            "channel": "#deploys",
            "text": ":rewind: shop/storefront-threads: rolled back (CheckFailed) — Deployment storefront runs puma 2×6 again",
            "attachments": [{
                "color": "danger",
                "fallback": "shop/storefront-threads: rolled back (CheckFailed) — Deployment storefront runs puma 2×6 again",
                "title": "shop/storefront-threads",
                "text": ROLLED_BACK,
                "fields": [
                    {"title": "Target", "value": "Deployment storefront", "short": true},
                    {"title": "Phase", "value": "RolledBack", "short": true},
                    {"title": "Stage", "value": "1/3 — 30% planned, 0% in force", "short": true},
                    {"title": "Reason", "value": "CheckFailed", "short": true},
                    {"title": "Baseline", "value": "puma 2×6", "short": true},
                    {"title": "Candidate", "value": "puma 1×1", "short": true},
                    {
                        "title": "✗ queueTime Fail",
                        "value": "baseline 1.7ms / candidate 459.2ms — limit max 50ms (candidate 459.2ms is above max 50ms)",
                        "short": false,
                    },
                ],
                "footer": "concurrency-operator · prod-eu",
                "ts": 1796100280,
            }],
        })
    );
}

#[test]
fn the_slack_message_without_options_has_no_overrides() {
    let body = slack_body(&advance(), &SlackOptions::default(), None);
    assert!(body.get("username").is_none() && body.get("channel").is_none());
    assert_eq!(body["attachments"][0]["color"], "#439FE0");
    assert_eq!(body["attachments"][0]["footer"], "concurrency-operator");
}

/// One line per kind: what happened and what the target runs.
#[test]
fn every_kind_has_its_headline_severity_and_colour() {
    let mut n = advance();
    n.stage = Some(crate::notify::Stage {
        index: 2,
        count: 3,
        planned_weight: 100,
        effective_weight: 100,
    });
    let who = "shop/storefront-threads";
    let expected = [
        (Kind::Started, "info", "#439FE0", format!("{who}: canary started — stage 3/3, 100% of traffic to puma 1×1 (baseline puma 2×6)")),
        (Kind::StageAdvanced, "info", "#439FE0", format!("{who}: advanced to stage 3/3, 100% of traffic to puma 1×1")),
        (Kind::AwaitingApproval, "warning", "warning", format!("{who}: all stages passed — waiting for approval to promote puma 1×1")),
        (Kind::Paused, "warning", "warning", format!("{who}: paused at stage 3/3 (X) — approve to go on, or abort")),
        (Kind::RolledBack, "warning", "danger", format!("{who}: rolled back (X) — Deployment storefront runs puma 2×6 again")),
        (Kind::Promoted, "info", "good", format!("{who}: promoted — Deployment storefront now runs puma 1×1")),
        (Kind::Invalid, "warning", "danger", format!("{who}: invalid — the experiment cannot run")),
    ];
    assert_eq!(expected.len(), Kind::ALL.len());
    n.kind = Kind::Started;
    n.reason = "SpecChanged".into();
    assert_eq!(
        headline(&n),
        format!("{who}: canary restarted with an edited candidate — stage 3/3, 100% of traffic to puma 1×1 (baseline puma 2×6)")
    );
    for (kind, severity, color, line) in expected {
        n.kind = kind;
        n.reason = "X".into();
        assert_eq!(headline(&n), line);
        let body = webhook_body(&n, None);
        assert_eq!(
            (body["kind"].as_str(), body["severity"].as_str()),
            (Some(kind.as_str()), Some(severity))
        );
        assert_eq!(body["text"], line);
        assert_eq!(
            slack_body(&n, &SlackOptions::default(), None)["attachments"][0]["color"],
            color
        );
    }
}

#[test]
fn slack_text_from_the_experiment_is_escaped() {
    let mut n = rollback();
    n.message = "pods <storefront-candidate-.*> & more".into();
    let body = slack_body(&n, &SlackOptions::default(), None);
    assert_eq!(
        body["attachments"][0]["text"],
        "pods &lt;storefront-candidate-.*&gt; &amp; more"
    );
    // The generic webhook carries the text as it is.
    assert_eq!(webhook_body(&n, None)["message"], n.message);
}
