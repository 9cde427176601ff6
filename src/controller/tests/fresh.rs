//! `baseline.fresh: true` through the reconciler against the fake API server: the fresh
//! baseline applied beside the candidate, the stage in force only with it ready, and gone at
//! 100 %.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::api::{BaselineSpec, ConcurrencyExperiment, Phase};

const FRESH: &str = "/apis/apps/v1/namespaces/shop/deployments/storefront-fresh-baseline";

#[tokio::test]
async fn a_fresh_baseline_runs_beside_the_stages_and_goes_at_100_percent() {
    let mut exp = with_finalizer(experiment());
    exp.spec.baseline = Some(BaselineSpec { fresh: true });
    let mut fake = FakeApi::default().with(EXP, exp).with(TARGET, target(6, 6));
    fake.run_selections = true;
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
