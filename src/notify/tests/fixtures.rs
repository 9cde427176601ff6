//! An experiment and the statuses the stage machine writes at its notable transitions.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::api::{
    AnalysisRecord, CheckResult, ConcurrencyExperiment, ConcurrencyExperimentStatus, Decision,
    DecisionAction, Phase, RenderedServer, VariantStatus, Verdict,
};
use crate::plan::{Action, EventType};

pub const UID: &str = "5a1e0c2e-0000-4000-8000-000000000001";

/// `shop/storefront-threads`: storefront from puma 2×6 to puma 1×1, queue-time check.
pub fn experiment() -> ConcurrencyExperiment {
    serde_json::from_value(json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "storefront-threads", "namespace": "shop", "uid": UID},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 1, "threads": 1},
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "checks": [
                    {"metric": "latency", "quantile": 0.99, "maxIncrease": "10%"},
                    {"metric": "queueTime", "max": "50ms"},
                ],
            },
        },
    }))
    .unwrap()
}

pub fn now() -> Timestamp {
    "2026-12-01T04:44:40Z".parse().unwrap()
}

pub fn event(type_: EventType, reason: &str, message: &str) -> Action {
    Action::Event {
        type_,
        reason: crate::api::reason::EventReason::parse(reason)
            .expect("an Event reason the machine writes"),
        message: message.into(),
    }
}

/// Running at stage `index` (0-based) of 3.
pub fn status(
    phase: Phase,
    index: i32,
    planned: i32,
    effective: i32,
) -> ConcurrencyExperimentStatus {
    let baseline = RenderedServer::from(
        &serde_json::from_value::<crate::api::ServerConfig>(
            json!({"server": "puma", "workers": 2, "threads": 6}),
        )
        .unwrap(),
    );
    ConcurrencyExperimentStatus {
        phase,
        stage_index: Some(index),
        stage: Some(format!("{}/3", index + 1)),
        planned_weight: planned,
        effective_weight: effective,
        baseline: Some(VariantStatus {
            deployment: "storefront".into(),
            summary: baseline.summary(),
            config: baseline,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The failed analysis of the demo's experiment 2: queue time 459 ms against max 50 ms.
pub fn failed_analysis() -> AnalysisRecord {
    AnalysisRecord {
        at: Time(now()),
        stage_index: 0,
        weight: 33,
        verdict: Verdict::Fail,
        baseline_requests: Some(800.0),
        candidate_requests: Some(220.0),
        checks: vec![
            CheckResult {
                name: "latency".into(),
                baseline: Some(0.072),
                candidate: Some(0.072),
                limit: "maxIncrease 10%".into(),
                verdict: Verdict::Pass,
                reason: None,
                evidence: None,
            },
            CheckResult {
                name: "queueTime".into(),
                baseline: Some(0.0017),
                candidate: Some(0.4592),
                limit: "max 50ms".into(),
                verdict: Verdict::Fail,
                reason: Some("candidate 459.2ms is above max 50ms".into()),
                evidence: None,
            },
        ],
        reason: None,
        capacity: None,
    }
}

pub const ROLLBACK_MESSAGE: &str = "Rolling back: 1 failed analyses exceed failureLimit 0; \
     queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).";

/// RolledBack after the failed analysis.
pub fn rolled_back() -> ConcurrencyExperimentStatus {
    let mut st = status(Phase::RolledBack, 0, 30, 0);
    st.analyses = vec![failed_analysis()];
    st.decision = Some(Decision {
        action: DecisionAction::Rollback,
        reason: "CheckFailed".into(),
        message: ROLLBACK_MESSAGE.into(),
        at: Time("2026-12-01T04:44:39Z".parse().unwrap()),
    });
    st
}
