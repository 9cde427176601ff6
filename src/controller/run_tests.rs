//! `run`'s wiring: which experiments a Deployment change wakes, and leader gating.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::fixtures::{experiment, target, FakeApi};
use super::{run, targeting, RunConfig, Settings};
use crate::telemetry::{CancellationToken, Metrics, Readiness};

#[test]
fn a_target_change_wakes_the_experiments_on_it_and_only_those() {
    let on_target = experiment();
    let mut elsewhere = experiment();
    elsewhere.metadata.name = Some("checkout-falcon".into());
    elsewhere.spec.target_ref.name = "checkout".into();
    let mut other_ns = experiment();
    other_ns.metadata.namespace = Some("billing".into());
    let all = [Arc::new(on_target), Arc::new(elsewhere), Arc::new(other_ns)];
    let woken: Vec<String> = targeting(&all, &target(6, 6))
        .into_iter()
        .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
        .collect();
    assert_eq!(woken, ["shop/storefront-puma-4"]);
}

#[tokio::test]
async fn a_standby_is_ready_and_never_calls_the_api() {
    let fake = FakeApi::default();
    let (ctx, server) = fake.context(&[]);
    let (_tx, rx) = watch::channel(false);
    let readiness = Readiness::new();
    let shutdown = CancellationToken::new();
    let config = RunConfig {
        namespaces: vec![],
        settings: Settings::default(),
        metrics: Metrics::new(),
        readiness: readiness.clone(),
        leader: Some(rx),
        shutdown: shutdown.clone(),
    };
    let running = tokio::spawn(run(ctx.client.clone(), config));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(readiness.is_ready(), "a standby reports ready");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), running)
        .await
        .expect("run stops on shutdown")
        .unwrap()
        .unwrap();
    server.abort();
    assert!(fake.calls().is_empty(), "{:?}", fake.lines());
}
