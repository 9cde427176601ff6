//! A selection through the reconciler against the fake API server: the variants applied as
//! the experiment's own, an eliminated candidate deleted, the winner rendered as the
//! candidate, and nothing left behind.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::clock::route_changed_long_ago;
use super::fixtures::*;
use super::variants::selection_experiment;
use crate::api::{ConcurrencyExperiment, Elimination, Phase};
use serde_json::json;

pub(super) const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";

pub(super) fn variant(i: usize) -> String {
    format!("{DEPLOYMENTS}/storefront-candidate-{}", i + 1)
}

pub(super) fn fresh() -> String {
    format!("{DEPLOYMENTS}/storefront-fresh-baseline")
}

/// Prometheus on a loopback port nothing listens on: every query fails at once (Inconclusive).
fn closed_prometheus() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

pub(super) fn selecting_fake() -> FakeApi {
    let mut exp = with_finalizer(selection_experiment());
    exp.spec.analysis.prometheus.url = closed_prometheus();
    FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6))
}

pub(super) fn edit_status(
    fake: &FakeApi,
    f: impl FnOnce(&mut crate::api::ConcurrencyExperimentStatus),
) {
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    f(exp.status.get_or_insert_with(Default::default));
    fake.put(EXP, exp);
}

pub(super) fn env_of(fake: &FakeApi, path: &str) -> Vec<(String, String)> {
    let d: Deployment = fake.get(path).unwrap();
    let pod = d.spec.unwrap().template.spec.unwrap();
    pod.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn a_selection_runs_its_variants_eliminates_chooses_and_leaves_nothing_behind() {
    let fake = selecting_fake();
    // Pending → Selecting: the fresh baseline and every candidate applied, one pod each.
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Selecting);
    assert_eq!(
        fake.lines(),
        [
            format!("PATCH {EXP}/status"),
            format!("PATCH {}", fresh()),
            format!("PATCH {}", variant(0)),
            format!("PATCH {}", variant(1)),
            format!("PATCH {}", variant(2)),
        ]
    );
    for call in fake
        .calls()
        .iter()
        .filter(|c| c.uri.starts_with(DEPLOYMENTS))
    {
        assert!(call
            .content_type
            .as_deref()
            .unwrap()
            .starts_with("application/apply-patch"));
        assert!(call
            .query()
            .contains(&"fieldManager=concurrency-operator".to_string()));
        assert_eq!(call.body["metadata"]["ownerReferences"][0]["uid"], EXP_UID);
        assert_eq!(call.body["spec"]["replicas"], 1);
    }
    assert!(env_of(&fake, &variant(1)).contains(&("RAILS_MAX_THREADS".into(), "4".into())));
    let target_env = env_of(&fake, TARGET);
    assert_eq!(
        env_of(&fake, &fresh()),
        target_env,
        "the target's template as it is"
    );

    // Every variant ready: the shares are in force (10 % each) and the duration starts.
    for path in [fresh(), variant(0), variant(1), variant(2)] {
        set_ready(&fake, &path, 1);
    }
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(fake.lines(), [format!("PATCH {EXP}/status")]);
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let started = exp.status.unwrap().selection.unwrap().started_at;
    assert!(started.is_some());

    // Candidate 1 was eliminated (as the machine records it): its pods go, the rest stay.
    edit_status(&fake, |s| {
        let v = &mut s.selection.as_mut().unwrap().variants[0];
        v.eliminated = Some(Elimination {
            at: Time(jiff::Timestamp::now()),
            checks: vec!["latency".into()],
            message: "eliminated".into(),
        });
    });
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(fake.lines().contains(&format!("DELETE {}", variant(0))));
    let delete = fake
        .calls()
        .into_iter()
        .find(|c| c.method == "DELETE")
        .unwrap();
    assert!(delete.body["preconditions"]["uid"].is_string());
    assert!(fake.get::<Deployment>(&variant(0)).is_none());
    assert_eq!(stored_phase(&fake), Phase::Selecting);

    // The duration is over with 2×3 measured lower: it wins, walks stage 1 as the candidate,
    // and the other variants go; the fresh baseline stays as the stages' reference.
    let ago = |mins: i64| Time(jiff::Timestamp::now() - jiff::SignedDuration::from_mins(mins));
    edit_status(&fake, |s| {
        let sel = s.selection.as_mut().unwrap();
        sel.started_at = Some(ago(30));
        for (i, mib) in [(1, 190.0), (2, 180.0)] {
            let v = &mut sel.variants[i];
            v.objective_samples = vec![mib * 1048576.0; 3];
            v.baseline_samples = vec![200.0 * 1048576.0; 3];
            v.passed_analyses = 3;
        }
        s.last_analysis_at = Some(ago(1));
    });
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.phase, Phase::Progressing);
    assert_eq!(status.selection.unwrap().winner, Some(2));
    assert!(env_of(&fake, CANDIDATE).contains(&("RAILS_MAX_THREADS".into(), "3".into())));
    assert!(fake.get::<Deployment>(&variant(1)).is_none());
    assert!(fake.get::<Deployment>(&variant(2)).is_none());
    assert!(fake.get::<Deployment>(&fresh()).is_some());
    assert!(fake
        .event_reasons()
        .contains(&"CandidateChosen".to_string()));

    // Aborted: the baseline restored, the candidate and the fresh baseline removed.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.abort = true;
    fake.put(EXP, exp);
    for _ in 0..4 {
        reconcile_stored(&fake).await.unwrap();
        set_ready(&fake, TARGET, 6);
    }
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    assert!(fake.get::<Deployment>(CANDIDATE).is_none());
    assert!(
        fake.get::<Deployment>(&fresh()).is_none(),
        "{:?}",
        fake.lines()
    );
    let left: Vec<String> = fake
        .objects
        .lock()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with(DEPLOYMENTS))
        .cloned()
        .collect();
    assert_eq!(left, [TARGET.to_string()]);
}

pub(super) fn route_refs(fake: &FakeApi) -> Vec<(String, i64)> {
    let route: serde_json::Value = fake.get(ROUTE).unwrap();
    route["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let w = b["weight"].as_i64().unwrap_or(1);
            (b["name"].as_str().unwrap().to_string(), w)
        })
        .collect()
}

pub(super) fn named(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(n, w)| (n.to_string(), *w)).collect()
}

#[tokio::test]
async fn a_gateway_selection_splits_the_route_n_ways_and_moves_traffic_off_before_pods_go() {
    let fake = selecting_fake();
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.traffic = serde_json::from_value(
        serde_json::json!({"router": "gatewayAPI", "httpRoute": "storefront"}),
    )
    .unwrap();
    fake.put(EXP, exp);
    let fake = gateway_objects(fake);
    reconcile_stored(&fake).await.unwrap();
    let svc = |name: &str| format!("{SERVICES}/{name}");
    for name in [
        "storefront-fresh-baseline",
        "storefront-candidate-1",
        "storefront-candidate-2",
        "storefront-candidate-3",
    ] {
        let s: k8s_openapi::api::core::v1::Service = fake.get(&svc(name)).unwrap();
        let selector = s.spec.unwrap().selector.unwrap();
        assert_eq!(
            selector["concurrency.dev/variant"],
            name.trim_start_matches("storefront-")
        );
    }
    // Traffic moves only onto ready pods.
    assert_eq!(route_refs(&fake), named(&[("storefront", 1)]));
    for path in [fresh(), variant(0), variant(1), variant(2)] {
        set_ready(&fake, &path, 1);
    }
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        route_refs(&fake),
        named(&[
            ("storefront-baseline", 60),
            ("storefront-fresh-baseline", 10),
            ("storefront-candidate-1", 10),
            ("storefront-candidate-2", 10),
            ("storefront-candidate-3", 10),
        ])
    );
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert!(exp.status.unwrap().selection.unwrap().started_at.is_some());

    // Eliminated: first its weight goes back to the baseline, then (seen at 0) its pods.
    edit_status(&fake, |s| {
        s.selection.as_mut().unwrap().variants[0].eliminated = Some(Elimination {
            at: Time(jiff::Timestamp::now()),
            checks: vec!["queueTime".into()],
            message: "eliminated".into(),
        });
    });
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        !fake.lines().iter().any(|l| l.starts_with("DELETE")),
        "{:?}",
        fake.lines()
    );
    assert_eq!(
        route_refs(&fake)[0],
        ("storefront-baseline".to_string(), 70)
    );
    assert!(!route_refs(&fake)
        .iter()
        .any(|(n, _)| n == "storefront-candidate-1"));
    route_changed_long_ago(&fake);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(
        fake.lines()
            .into_iter()
            .filter(|l| l.starts_with("DELETE"))
            .collect::<Vec<_>>(),
        [
            format!("DELETE {}", svc("storefront-candidate-1")),
            format!("DELETE {}", variant(0)),
        ]
    );

    // Aborted: the route back as it was, every Service and variant of the experiment gone.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.abort = true;
    fake.put(EXP, exp);
    for _ in 0..4 {
        reconcile_stored(&fake).await.unwrap();
        route_changed_long_ago(&fake);
    }
    assert_eq!(stored_phase(&fake), Phase::RolledBack);
    assert_eq!(route_refs(&fake), named(&[("storefront", 1)]));
    let left: Vec<String> = fake
        .objects
        .lock()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with(SERVICES) || k.starts_with(DEPLOYMENTS))
        .cloned()
        .collect();
    assert_eq!(left, [svc("storefront"), TARGET.to_string()]);
}

/// A selection's variant whose app container was OOM-killed in the interval fails that
/// interval on `restarts`, as the single candidate does, whatever Prometheus said (here it is
/// unreachable, so every other check is Inconclusive).
#[tokio::test]
async fn a_killed_variant_fails_its_interval_on_restarts() {
    let fake = selecting_fake();
    reconcile_stored(&fake).await.unwrap();
    for path in [fresh(), variant(0), variant(1), variant(2)] {
        set_ready(&fake, &path, 1);
    }
    reconcile_stored(&fake).await.unwrap();
    let ago = |secs: i64| Time(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(secs));
    edit_status(&fake, |s| {
        s.selection.as_mut().unwrap().started_at = Some(ago(300));
        s.last_analysis_at = Some(ago(120));
    });
    // The fake lists every pod of the namespace for any selector: each variant sees the kill.
    let killed_at = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(30)).to_string();
    fake.put(
        &format!("{PODS}/storefront-candidate-1-7c9f-x1y2z"),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "storefront-candidate-1-7c9f-x1y2z", "namespace": "shop"},
            "status": {"containerStatuses": [{
                "name": "web", "ready": true, "restartCount": 1, "image": "i", "imageID": "",
                "state": {"running": {}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                             "finishedAt": killed_at}},
            }]},
        }),
    );
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        fake.lines().contains(&format!("GET {PODS}")),
        "{:?}",
        fake.lines()
    );
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let sel = exp.status.unwrap().selection.unwrap();
    for v in &sel.variants {
        let r = v.checks.iter().find(|c| c.name == "restarts");
        let r =
            r.unwrap_or_else(|| panic!("variant {}: no restarts entry: {:?}", v.index, v.checks));
        assert_eq!(r.verdict, crate::api::Verdict::Fail, "{r:?}");
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("OOMKilled (exit code 137)"),
            "{r:?}"
        );
    }
}
