use crate::workload::names::*;

#[test]
fn short_names_are_kept_whole() {
    assert_eq!(candidate_name("storefront"), "storefront-candidate");
    assert_eq!(baseline_service_name("storefront"), "storefront-baseline");
    assert_eq!(candidate_service_name("web"), "web-candidate");
    assert_eq!(label_value("exp-1"), "exp-1");
}

#[test]
fn long_names_are_cut_with_a_hash_and_stay_distinct() {
    let a = format!("{}-a", "x".repeat(60));
    let b = format!("{}-b", "x".repeat(60));
    let (ca, cb) = (candidate_name(&a), candidate_name(&b));
    assert_eq!(ca.len(), MAX_CANDIDATE_NAME);
    assert!(ca.ends_with("-candidate") && ca.starts_with("xxxx"), "{ca}");
    assert_ne!(ca, cb);
    assert_eq!(candidate_name(&a), ca, "stable");

    let long = "s".repeat(70);
    assert_eq!(baseline_service_name(&long).len(), 63);
    assert_eq!(label_value(&long).len(), 63);
    assert!(label_value(&"e".repeat(300)).len() <= 63);
    // A cut that ends in a dash does not leave a double dash.
    let dashy = format!("{}-{}", "d".repeat(35), "z".repeat(40));
    assert!(
        !candidate_name(&dashy).contains("--"),
        "{}",
        candidate_name(&dashy)
    );
}
