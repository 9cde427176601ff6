use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use super::fixtures::experiment;
use crate::controller::experiments::*;

fn dynamic(value: serde_json::Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[test]
fn a_good_experiment_passes_and_a_malformed_one_is_skipped() {
    let good = dynamic(serde_json::to_value(experiment()).unwrap());
    match typed(Ok(Event::Apply(good))) {
        Some(Ok(Event::Apply(exp))) => assert_eq!(exp, experiment()),
        other => panic!("{other:?}"),
    }
    let mut bad = serde_json::to_value(experiment()).unwrap();
    bad["spec"]["stages"] = serde_json::json!("30,70,100");
    assert!(typed(Ok(Event::InitApply(dynamic(bad)))).is_none());
    assert!(matches!(
        typed(Ok(Event::InitDone)),
        Some(Ok(Event::InitDone))
    ));
}
