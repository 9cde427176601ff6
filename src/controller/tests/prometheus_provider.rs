//! An experiment whose Prometheus the operator's configuration cannot serve is `Invalid`
//! before anything runs, with the field named.

use std::sync::Arc;

use super::fixtures::*;
use crate::api::{ConcurrencyExperiment, Phase};
use crate::controller::reconcile::reconcile;

async fn invalid_with(edit: impl Fn(&mut ConcurrencyExperiment)) -> String {
    let mut exp = with_finalizer(experiment());
    edit(&mut exp);
    let fake = FakeApi::default()
        .with(EXP, &exp)
        .with(TARGET, target(6, 6));
    let (ctx, server) = fake.context(std::slice::from_ref(&exp));
    reconcile(Arc::new(exp), ctx).await.unwrap();
    server.abort();
    let stored: ConcurrencyExperiment = fake.get(EXP).unwrap();
    let status = stored.status.unwrap();
    assert_eq!(status.phase, Phase::Invalid, "{:?}", status.message);
    assert!(
        !fake
            .lines()
            .iter()
            .any(|l| l.contains("storefront-candidate") && !l.starts_with("GET")),
        "{:?}",
        fake.lines()
    );
    status.message.unwrap_or_default()
}

#[tokio::test]
async fn unknown_credentials_or_no_url_without_a_default_are_invalid() {
    let message = invalid_with(|e| {
        e.spec.analysis.prometheus.credentials = Some("team-b".into());
    })
    .await;
    assert!(
        message.contains("spec.analysis.prometheus.credentials: no credentials set \"team-b\""),
        "{message}"
    );
    let message = invalid_with(|e| e.spec.analysis.prometheus.url.clear()).await;
    assert!(
        message.contains("spec.analysis.prometheus.url: required"),
        "{message}"
    );
}
