//! The per-experiment gauges as the reconcile shell sets and drops them.

use kube::api::ObjectMeta;

use super::fixtures::*;
use crate::api::ConcurrencyExperiment;

const SERIES: &str = r#"namespace="shop",experiment="storefront-puma-4""#;

fn gauge(fake: &FakeApi, name: &str, extra: &str) -> Option<f64> {
    let series = format!("{name}{{{SERIES}{extra}}} ");
    fake.metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.parse().ok())
}

fn deleting(fake: &FakeApi) {
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    exp.metadata = ObjectMeta {
        deletion_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        )),
        ..exp.metadata
    };
    fake.put(EXP, exp);
}

#[tokio::test]
async fn gauges_follow_each_status_write_and_go_with_the_experiment() {
    let fake = FakeApi::default()
        .with(EXP, with_finalizer(experiment()))
        .with(TARGET, target(6, 6));
    reconcile_stored(&fake).await.unwrap();
    // Stage 1 of 30% planned; no candidate pod is ready yet.
    assert_eq!(
        gauge(&fake, "concurrency_experiment_stage_index", ""),
        Some(0.0)
    );
    assert_eq!(
        gauge(&fake, "concurrency_experiment_weight", r#",kind="planned""#),
        Some(30.0)
    );
    assert_eq!(
        gauge(
            &fake,
            "concurrency_experiment_weight",
            r#",kind="effective""#
        ),
        Some(0.0)
    );
    assert_eq!(
        gauge(
            &fake,
            "concurrency_experiment_phase",
            r#",phase="Progressing""#
        ),
        Some(1.0)
    );
    assert_eq!(
        gauge(&fake, "concurrency_experiment_failed_analyses", ""),
        Some(0.0)
    );

    set_ready(&fake, CANDIDATE, 2);
    reconcile_stored(&fake).await.unwrap();
    // 2 candidate pods next to the 6 baseline pods still running.
    let stored = fake
        .get::<ConcurrencyExperiment>(EXP)
        .unwrap()
        .status
        .unwrap();
    assert_eq!(stored.effective_weight, 25);
    assert_eq!(
        gauge(
            &fake,
            "concurrency_experiment_weight",
            r#",kind="effective""#
        ),
        Some(25.0)
    );

    // Deleted mid-flight: the series stay while the baseline is restored, then go.
    set_ready(&fake, TARGET, 4);
    deleting(&fake);
    reconcile_stored(&fake).await.unwrap();
    assert!(gauge(
        &fake,
        "concurrency_experiment_phase",
        r#",phase="RollingBack""#
    )
    .is_some());
    set_ready(&fake, TARGET, 6);
    for _ in 0..3 {
        reconcile_stored(&fake).await.unwrap();
    }
    let text = fake.metrics.encode();
    assert!(
        !text.contains("storefront-puma-4"),
        "series left after the finalizer was released:\n{text}"
    );
}
