//! What is checked before any traffic moves: the baseline's server variables from ConfigMaps
//! (fetched, never a Secret), a target whose server flags cannot be rewritten, and custom
//! queries that cannot run.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase};

const CONFIG_MAPS: &str = "/api/v1/namespaces/shop/configmaps";

/// The target with its counts in a ConfigMap (`envFrom`), threads from a key of another, a
/// Secret next to them and a ConfigMap that does not exist (optional).
fn target_from_config_maps() -> Deployment {
    let mut t = target(6, 6);
    let spec = t.spec.as_mut().unwrap();
    let web = &mut spec.template.spec.as_mut().unwrap().containers[0];
    *web = serde_json::from_value(json!({
        "name": "web", "image": "registry.example/storefront:1.4",
        "envFrom": [
            {"configMapRef": {"name": "puma"}},
            {"configMapRef": {"name": "absent", "optional": true}},
            {"secretRef": {"name": "rails-secrets"}},
        ],
        "env": [
            {"name": "RAILS_MAX_THREADS", "valueFrom": {"configMapKeyRef": {"name": "tuning", "key": "threads"}}},
            {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}},
        ],
    }))
    .unwrap();
    t
}

fn config_map(name: &str, data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NS}, "data": data})
}

#[tokio::test]
async fn the_baseline_is_read_from_the_referenced_config_maps() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target_from_config_maps())
        .with(
            &format!("{CONFIG_MAPS}/puma"),
            config_map(
                "puma",
                json!({"WEB_CONCURRENCY": "2", "RAILS_MAX_THREADS": "5"}),
            ),
        )
        .with(
            &format!("{CONFIG_MAPS}/tuning"),
            config_map("tuning", json!({"threads": "6"})),
        );
    reconcile_stored(&fake).await.unwrap();
    let lines = fake.lines();
    for name in ["absent", "puma", "tuning"] {
        assert!(
            lines.contains(&format!("GET {CONFIG_MAPS}/{name}")),
            "{lines:?}"
        );
    }
    assert!(
        !lines.iter().any(|l| l.contains("/secrets")),
        "never a Secret: {lines:?}"
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::Progressing);
    let baseline = status.baseline.unwrap();
    assert_eq!(baseline.summary, "puma 2×6");
    // Each variant's `{{pods}}` regex, as its queries get it.
    assert_eq!(
        baseline.pods,
        Some(crate::analysis::pods_regex("storefront"))
    );
    assert_eq!(
        status.candidate.unwrap().pods,
        Some(crate::analysis::pods_regex("storefront-candidate"))
    );
    assert!(
        baseline.config.unresolved.is_empty(),
        "{:?}",
        baseline.config.unresolved
    );
    // The candidate sets literals, which beat the ConfigMaps.
    let apply = fake
        .calls()
        .into_iter()
        .find(|c| c.line() == format!("PATCH {CANDIDATE}"))
        .unwrap();
    let env = &apply.body["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "RAILS_MAX_THREADS", "value": "4"})),
        "{env}"
    );
}

#[tokio::test]
async fn server_flags_that_cannot_be_rewritten_make_the_experiment_invalid() {
    let mut t = target(6, 6);
    let web = &mut t
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    web.command = Some(
        ["sh", "-c", "bundle exec puma --thread 6:6 -w 2"]
            .map(String::from)
            .to_vec(),
    );
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, t);
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Invalid);
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let message = exp.status.unwrap().message.unwrap();
    assert!(
        message.contains("`--thread` in command[2]") && message.contains("write --threads"),
        "{message}"
    );
    assert!(
        !fake.lines().contains(&format!("PATCH {CANDIDATE}")),
        "nothing created: {:?}",
        fake.lines()
    );
}

#[tokio::test]
async fn a_custom_query_that_is_not_promql_is_invalid_before_any_traffic_moves() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.checks = serde_json::from_value(json!([
        {"metric": "latency", "max": "500ms"},
        {"name": "backlog", "query": "max(puma_backlog{pod=~\"{{pods}}\"}", "max": 5},
    ]))
    .unwrap();
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Invalid);
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let message = exp.status.unwrap().message.unwrap();
    assert!(
        message.starts_with(
            "The experiment cannot run: spec.analysis.checks[1].query: check backlog: not valid PromQL"
        ),
        "{message}"
    );
    assert_no_deployment_written(&fake);
}

#[tokio::test]
async fn a_policy_against_overrides_refuses_a_candidates_env_before_anything_moves() {
    let mut exp = with_finalizer(experiment());
    let candidate = exp.spec.candidate.as_mut().unwrap();
    candidate.env =
        serde_json::from_value(json!([{"name": "LD_PRELOAD", "value": "/x.so"}])).unwrap();
    let fake = FakeApi {
        forbid_overrides: true,
        ..FakeApi::default()
    }
    .with(EXP, exp.clone())
    .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Invalid);
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let message = stored.status.unwrap().message.unwrap();
    assert!(
        message
            .contains("spec.candidate.env: this operator refuses candidate command, args and env"),
        "{message}"
    );
    assert_no_deployment_written(&fake);
    // The same experiment under the default policy runs.
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert_ne!(stored_phase(&fake), Phase::Invalid);
}

/// An Invalid experiment wrote no Deployment: neither the target nor a candidate.
fn assert_no_deployment_written(fake: &FakeApi) {
    assert!(
        !fake
            .lines()
            .iter()
            .any(|l| l.starts_with("PATCH /apis/apps")),
        "no Deployment touched: {:?}",
        fake.lines()
    );
}
