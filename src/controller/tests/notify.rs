//! Notifications from the reconcile shell: each stored transition is told once, and a
//! reconcile replayed after a restart (a fresh Context: new caches, new notifier queue — what a
//! restarted or newly elected operator has) or from a stale copy of the experiment tells
//! nothing again.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::mpsc;

use super::fixtures::*;
use super::promote::{fake_prometheus, let_an_hour_pass};
use crate::api::{ConcurrencyExperiment, Phase, ANNOTATION_ABORT};
use crate::controller::reconcile::reconcile;
use crate::notify::deliver::Notifier;
use crate::notify::{Filter, Kind, Notification};

fn notifying(mut fake: FakeApi) -> (FakeApi, mpsc::Receiver<Notification>) {
    let (notifier, rx) = Notifier::channel(Filter::default(), 64, fake.metrics.clone());
    fake.notifier = notifier;
    (fake, rx)
}

fn drain(rx: &mut mpsc::Receiver<Notification>) -> Vec<Notification> {
    let mut out = Vec::new();
    while let Ok(n) = rx.try_recv() {
        out.push(n);
    }
    out
}

/// One reconcile, then the same reconcile again as a restarted operator would run it at once:
/// what both told. The replay sees the first one's status (and the effect of its actions, which
/// may complete the next transition — told then, for the first time).
async fn reconcile_and_replay(
    fake: &FakeApi,
    rx: &mut mpsc::Receiver<Notification>,
) -> Vec<Notification> {
    reconcile_stored(fake).await.unwrap();
    reconcile_stored(fake).await.unwrap();
    drain(rx)
}

#[tokio::test]
async fn a_promotion_tells_each_transition_once_even_when_every_reconcile_is_replayed() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    let (fake, mut rx) = notifying(FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6)));
    let mut told = Vec::new();
    for _ in 0..30 {
        told.extend(reconcile_and_replay(&fake, &mut rx).await);
        if stored_phase(&fake) == Phase::Succeeded {
            break;
        }
        let_an_hour_pass(&fake);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(stored_phase(&fake), Phase::Succeeded);
    let kinds: Vec<(Kind, Option<i32>)> = told
        .iter()
        .map(|n| (n.kind, n.stage.as_ref().map(|s| s.index)))
        .collect();
    assert_eq!(
        kinds,
        [
            (Kind::Started, Some(0)),
            (Kind::StageAdvanced, Some(1)),
            (Kind::StageAdvanced, Some(2)),
            (Kind::Promoted, Some(2)),
        ]
    );
    let promoted = &told[3];
    assert_eq!(promoted.reason, "StagesPassed");
    assert_eq!(
        promoted.message,
        "Promoted: Deployment storefront now runs puma 2×4."
    );
    let mut ids: Vec<&str> = told.iter().map(|n| n.id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "one id per transition");
    // A finished experiment's resyncs tell nothing either.
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(drain(&mut rx), []);
}

#[tokio::test]
async fn an_aborted_experiment_tells_its_rollback_once_when_the_baseline_is_back() {
    let (fake, mut rx) = notifying(
        FakeApi::default()
            .with(EXP, with_finalizer(experiment()))
            .with(TARGET, target(6, 6)),
    );
    let started = reconcile_and_replay(&fake, &mut rx).await;
    assert_eq!(
        started.iter().map(|n| n.kind).collect::<Vec<_>>(),
        [Kind::Started]
    );
    let mut exp: serde_json::Value = fake.get(EXP).unwrap();
    exp["metadata"]["annotations"] = json!({ANNOTATION_ABORT: "true"});
    fake.put(EXP, exp);
    let mut told = Vec::new();
    for _ in 0..10 {
        told.extend(reconcile_and_replay(&fake, &mut rx).await);
        if stored_phase(&fake) == Phase::RolledBack {
            break;
        }
        let_an_hour_pass(&fake);
    }
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        (told[0].kind, told[0].reason.as_str()),
        (Kind::RolledBack, "Aborted")
    );
    let decision = told[0].decision.as_ref().expect("the decision");
    assert_eq!(
        decision.message,
        "Aborted on request; restoring the baseline."
    );
}

/// A second operator acting on the experiment as it was before the transition was stored (a
/// stale cache after a failover): its status write is refused (resourceVersion), so it does not
/// tell the transition again.
#[tokio::test]
async fn a_decision_made_from_a_stale_copy_is_not_told() {
    let (fake, mut rx) = notifying(
        FakeApi::default()
            .with(EXP, with_finalizer(experiment()))
            .with(TARGET, target(6, 6)),
    );
    let stale: ConcurrencyExperiment = fake.get(EXP).unwrap();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(drain(&mut rx).len(), 1, "Started");
    let (ctx, server) = fake.context(std::slice::from_ref(&stale));
    reconcile(Arc::new(stale), ctx).await.unwrap();
    server.abort();
    assert_eq!(drain(&mut rx), []);
    assert_eq!(stored_phase(&fake), Phase::Progressing);
}

/// The operator died after storing the transition and before its actions ran (here: the
/// candidate it was to create does not exist). The restarted one redoes the actions from the
/// stored status, and does not tell the transition again.
#[tokio::test]
async fn a_restart_between_the_status_write_and_the_actions_tells_nothing_again() {
    let (fake, mut rx) = notifying(
        FakeApi::default()
            .with(EXP, with_finalizer(experiment()))
            .with(TARGET, target(6, 6)),
    );
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        drain(&mut rx).iter().map(|n| n.kind).collect::<Vec<_>>(),
        [Kind::Started]
    );
    fake.objects.lock().unwrap().remove(CANDIDATE);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        fake.lines().contains(&format!("PATCH {CANDIDATE}")),
        "the candidate is applied again: {:?}",
        fake.lines()
    );
    assert_eq!(drain(&mut rx), []);
}

/// Through the real analysis and stage machine: a candidate over an absolute limit is rolled
/// back, and the notification carries the failing check with both values and the limit.
#[tokio::test]
async fn a_failed_check_rollback_is_told_with_the_checks_values_and_limit() {
    let mut exp = with_finalizer(experiment());
    exp.spec.analysis.prometheus.url = fake_prometheus("100").await;
    exp.spec.analysis.checks =
        serde_json::from_value(json!([{"metric": "latency", "quantile": 0.99, "max": "50ms"}]))
            .unwrap();
    let (fake, mut rx) = notifying(FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6)));
    let mut told = Vec::new();
    for _ in 0..30 {
        told.extend(reconcile_and_replay(&fake, &mut rx).await);
        if stored_phase(&fake) == Phase::RolledBack {
            break;
        }
        let_an_hour_pass(&fake);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    let kinds: Vec<Kind> = told.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [Kind::Started, Kind::RolledBack]);
    let n = &told[1];
    assert_eq!(n.reason, "CheckFailed");
    assert_eq!(n.checks.len(), 1, "{:?}", n.checks);
    let c = &n.checks[0];
    assert_eq!(c.result.name, "latency");
    assert_eq!(c.result.limit, "max 50ms");
    assert_eq!(c.result.candidate, Some(100.0));
    assert_eq!(
        (c.baseline.as_str(), c.candidate.as_str()),
        ("100s", "100s")
    );
}
