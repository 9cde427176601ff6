//! `run`'s wiring: which experiments a Deployment change wakes, and leader gating.

use std::time::Duration;

use tokio::sync::watch;

use super::fixtures::{experiment, target, FakeApi};
use crate::controller::index::ExperimentIndex;
use crate::controller::{run, waking, RunConfig, Settings};
use crate::telemetry::{CancellationToken, Metrics, Readiness};

/// Waits (up to 10 s, for a loaded machine) until `condition` holds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting: {what}");
}

#[test]
fn a_target_change_wakes_the_experiments_on_it_and_only_those() {
    let on_target = experiment();
    let mut elsewhere = experiment();
    elsewhere.metadata.name = Some("checkout-falcon".into());
    elsewhere.spec.target_ref.name = "checkout".into();
    let mut other_ns = experiment();
    other_ns.metadata.namespace = Some("billing".into());
    let index = ExperimentIndex::default();
    for e in [on_target, elsewhere, other_ns] {
        index.apply(&kube::runtime::watcher::Event::Apply(e));
    }
    let woken: Vec<String> = waking(&index, &target(6, 6))
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
        notifier: Default::default(),
        shutdown: shutdown.clone(),
    };
    let running = tokio::spawn(run(ctx.client.clone(), config));
    eventually("a standby reports ready", || readiness.is_ready()).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), running)
        .await
        .expect("run stops on shutdown")
        .unwrap()
        .unwrap();
    server.abort();
    assert!(fake.calls().is_empty(), "{:?}", fake.lines());
}

#[tokio::test]
async fn losing_the_lease_stops_the_controllers_and_waits_for_it_again() {
    let fake = FakeApi::default();
    let (ctx, server) = fake.context(&[]);
    let (tx, rx) = watch::channel(false);
    let readiness = Readiness::new();
    let shutdown = CancellationToken::new();
    let metrics = Metrics::new();
    let config = RunConfig {
        namespaces: vec!["shop".into()],
        settings: Settings::default(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        leader: Some(rx),
        notifier: Default::default(),
        shutdown: shutdown.clone(),
    };
    let running = tokio::spawn(run(ctx.client.clone(), config));
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Leading: the watches started (the fake has no experiments to list, so never synced).
    assert!(!readiness.is_ready(), "not ready until the caches sync");
    assert!(
        fake.calls().iter().any(|c| c.method == "GET"),
        "watches started"
    );

    // What this replica exported while leading (as a reconcile would have set it).
    metrics.set_experiment("shop", "storefront-puma-4", &Default::default());
    tx.send(false).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(readiness.is_ready(), "a standby again");
    assert!(
        !metrics.encode().contains("storefront-puma-4"),
        "a standby exports no per-experiment series"
    );
    assert!(!running.is_finished(), "waits for the lease again");
    let calls = fake.calls().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(fake.calls().len(), calls, "no API calls while standing by");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), running)
        .await
        .expect("run stops on shutdown")
        .unwrap()
        .unwrap();
    server.abort();
}
