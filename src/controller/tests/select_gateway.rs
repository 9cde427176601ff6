//! A `gatewayAPI` selection's choice through the reconciler: the route leaves the candidates
//! (the fresh baseline keeps its share) before their pods go, and stage 1's split replaces
//! every selection ref with the baseline, the winner and the fresh baseline beside it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::clock::route_changed_long_ago;
use super::fixtures::*;
use super::select::*;
use crate::api::{ConcurrencyExperiment, Phase};

#[tokio::test]
async fn after_the_choice_stage_one_splits_the_route_between_baseline_winner_and_fresh() {
    let fake = selecting_fake();
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.spec.traffic = serde_json::from_value(
        serde_json::json!({"router": "gatewayAPI", "httpRoute": "storefront"}),
    )
    .unwrap();
    fake.put(EXP, exp);
    let fake = gateway_objects(fake);
    reconcile_stored(&fake).await.unwrap();
    for path in [fresh(), variant(0), variant(1), variant(2)] {
        set_ready(&fake, &path, 1);
    }
    reconcile_stored(&fake).await.unwrap();
    reconcile_stored(&fake).await.unwrap();
    // The duration is over with candidate 2 (puma 2×4) measured lowest.
    let ago = |mins: i64| Time(jiff::Timestamp::now() - jiff::SignedDuration::from_mins(mins));
    edit_status(&fake, |s| {
        let sel = s.selection.as_mut().unwrap();
        sel.started_at = Some(ago(30));
        for (i, mib) in [(0, 190.0), (1, 170.0), (2, 180.0)] {
            let v = &mut sel.variants[i];
            v.objective_samples = vec![mib * 1048576.0; 3];
            v.baseline_samples = vec![200.0 * 1048576.0; 3];
            v.passed_analyses = 3;
        }
        s.last_analysis_at = Some(ago(1));
    });
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(
        (status.phase, status.selection.unwrap().winner),
        (Phase::Progressing, Some(1))
    );
    // The candidates' refs left the route first; their pods are still there.
    assert_eq!(
        route_refs(&fake),
        named(&[
            ("storefront-baseline", 90),
            ("storefront-fresh-baseline", 10)
        ])
    );
    assert!((0..3).all(|i| fake.get::<Deployment>(&variant(i)).is_some()));
    // Seen at weight 0, they go (scaleDownDelay later); the winner's candidate comes up.
    route_changed_long_ago(&fake);
    reconcile_stored(&fake).await.unwrap();
    assert!((0..3).all(|i| fake.get::<Deployment>(&variant(i)).is_none()));
    assert!(env_of(&fake, CANDIDATE).contains(&("RAILS_MAX_THREADS".into(), "4".into())));
    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    // Stage 1: the candidate's 30 % exact, the fresh baseline its 10 %, the baseline the rest.
    assert_eq!(
        route_refs(&fake),
        named(&[
            ("storefront-baseline", 60),
            ("storefront-candidate", 30),
            ("storefront-fresh-baseline", 10)
        ])
    );
    reconcile_stored(&fake).await.unwrap();
    let exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = exp.status.unwrap();
    assert_eq!(status.effective_weight, 30);
    assert!(status.stage_started_at.is_some(), "{:?}", status.message);
}
