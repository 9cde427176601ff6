//! `baseline.fresh: true` through the reconciler against the fake API server: the fresh
//! baseline applied beside the candidate, the stage in force only with it ready, and gone at
//! 100 %.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::clock::route_changed_long_ago;
use super::fixtures::*;
use crate::api::{BaselineSpec, ConcurrencyExperiment, Phase};

const FRESH: &str = "/apis/apps/v1/namespaces/shop/deployments/storefront-fresh-baseline";

#[tokio::test]
async fn a_fresh_baseline_runs_beside_the_stages_and_goes_at_100_percent() {
    let mut exp = with_finalizer(experiment());
    exp.spec.baseline = Some(BaselineSpec { fresh: true });
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    assert_eq!(stored_phase(&fake), Phase::Progressing);
    assert_eq!(
        fake.lines(),
        [
            format!("PATCH {EXP}/status"),
            format!("PATCH {CANDIDATE}"),
            format!("PATCH {FRESH}"),
        ]
    );
    let fresh: Deployment = fake.get(FRESH).unwrap();
    assert_eq!(fresh.spec.as_ref().unwrap().replicas, Some(1));
    // The candidate alone ready is not the stage in force: the target shrinks, but the clock
    // waits for the fresh baseline.
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, TARGET, 4);
    reconcile_stored(&fake).await.unwrap();
    let status = |fake: &FakeApi| {
        let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
        exp.status.unwrap()
    };
    assert_eq!(status(&fake).stage_started_at, None);
    set_ready(&fake, FRESH, 1);
    reconcile_stored(&fake).await.unwrap();
    let st = status(&fake);
    assert!(st.stage_started_at.is_some(), "{st:?}");
    // 2 candidate pods of 4 + 1 + 2 behind the user's Service.
    assert_eq!(st.effective_weight, 29);

    // At the last stage (100 %) no baseline serves: the fresh baseline is removed.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let st = exp.status.as_mut().unwrap();
    st.stage_index = Some(2);
    st.stage = Some("3/3".into());
    st.planned_weight = 100;
    st.stage_started_at = None;
    st.stage_entered_at = Some(Time(jiff::Timestamp::now()));
    fake.put(EXP, exp);
    fake.clear_calls();
    reconcile_stored(&fake).await.unwrap();
    assert!(
        fake.lines().contains(&format!("DELETE {FRESH}")),
        "{:?}",
        fake.lines()
    );
    assert!(fake.get::<Deployment>(FRESH).is_none());
}

fn route_names(fake: &FakeApi) -> Vec<(String, i64)> {
    let route: serde_json::Value = fake.get(ROUTE).unwrap();
    route["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let name = b["name"].as_str().unwrap_or_default().to_string();
            (name, b["weight"].as_i64().unwrap_or(1))
        })
        .collect()
}

#[tokio::test]
async fn on_the_gateway_the_fresh_baseline_has_its_weight_and_at_100_percent_only_it_goes() {
    let mut exp = gateway_experiment();
    exp.spec.baseline = Some(BaselineSpec { fresh: true });
    let fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    let fake = gateway_objects(fake);
    reconcile_stored(&fake).await.unwrap();
    set_ready(&fake, CANDIDATE, 2);
    set_ready(&fake, FRESH, 1);
    reconcile_stored(&fake).await.unwrap();
    let owned = |n: &str, w: i64| (n.to_string(), w);
    assert_eq!(
        route_names(&fake),
        [
            owned("storefront-baseline", 60),
            owned("storefront-candidate", 30),
            owned("storefront-fresh-baseline", 10)
        ]
    );
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    assert!(exp.status.unwrap().stage_started_at.is_some());

    // At 100 %: the fresh baseline's weight goes first, then its pods and Service — and the
    // baseline Service the route still names (at weight 0) stays until the candidate goes.
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let st = exp.status.as_mut().unwrap();
    st.stage_index = Some(2);
    st.stage = Some("3/3".into());
    st.planned_weight = 100;
    st.stage_started_at = None;
    st.stage_entered_at = Some(Time(jiff::Timestamp::now()));
    fake.put(EXP, exp);
    set_ready(&fake, CANDIDATE, 6);
    for _ in 0..3 {
        reconcile_stored(&fake).await.unwrap();
        set_ready(&fake, CANDIDATE, 6);
        route_changed_long_ago(&fake);
    }
    assert!(
        fake.get::<Deployment>(FRESH).is_none(),
        "{:?}",
        fake.lines()
    );
    let svc = |name: &str| format!("{SERVICES}/{name}");
    let service = |name: &str| fake.get::<serde_json::Value>(&svc(name));
    assert!(service("storefront-fresh-baseline").is_none());
    assert!(service("storefront-baseline").is_some());
    assert!(!route_names(&fake)
        .iter()
        .any(|(n, _)| n == "storefront-fresh-baseline"));
}
