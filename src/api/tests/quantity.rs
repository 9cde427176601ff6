use crate::api::quantity::*;
use std::time::Duration;
// The name it had in workload, where it came from.
use crate::api::quantity::parse_quantity as quantity;

#[test]
fn limit_schema_bounds_its_length_for_the_cel_cost_budget() {
    // kube-apiserver 1.34 refused the CRD without this bound (cost 15x over budget).
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Limit>();
    let v = serde_json::to_value(&schema).unwrap();
    assert_eq!(v["maxLength"], serde_json::json!(MAX_LIMIT_LEN));
    assert!(v["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap()
        .contains("matches("));
}

#[test]
fn durations_parse_like_go() {
    assert_eq!(
        parse_duration("d", "10m").unwrap(),
        Duration::from_secs(600)
    );
    assert_eq!(
        parse_duration("d", "1h30m").unwrap(),
        Duration::from_secs(5400)
    );
    assert_eq!(
        parse_duration("d", "500ms").unwrap(),
        Duration::from_millis(500)
    );
    assert_eq!(
        parse_duration("d", "1.5m").unwrap(),
        Duration::from_secs(90)
    );
    for bad in ["", "10", "m", "10x", "-5s", "1 m"] {
        let e = parse_duration("spec.stages[0].duration", bad).unwrap_err();
        assert!(e.to_string().starts_with("spec.stages[0].duration"), "{e}");
    }
}

#[test]
fn durations_format_back() {
    assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
}

#[test]
fn limits_carry_units() {
    assert_eq!(parse_limit("x", "500ms").unwrap(), 0.5);
    assert!((parse_limit("x", "15%").unwrap() - 0.15).abs() < 1e-12);
    assert_eq!(parse_limit("x", "512Mi").unwrap(), 512.0 * 1024.0 * 1024.0);
    assert_eq!(parse_limit("x", "5").unwrap(), 5.0);
    assert_eq!(Limit::Int(7).value("x").unwrap(), 7.0);
    assert!(parse_limit("max", "5 apples").is_err());
    assert!((parse_percent("maxIncrease", "10%").unwrap() - 0.1).abs() < 1e-12);
    assert!(parse_percent("maxIncrease", "10").is_err());
}

#[test]
fn quantities_compare_by_value() {
    assert_eq!(quantity("1Gi"), quantity("1024Mi"));
    assert_eq!(quantity("500m"), Some(0.5));
    assert_eq!(quantity("2e3"), Some(2000.0));
    assert_eq!(quantity("1E"), Some(1e18));
    assert_eq!(quantity("lots"), None);
}
