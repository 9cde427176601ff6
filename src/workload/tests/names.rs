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

#[test]
fn selection_variants_have_names_whose_pods_no_other_regex_matches() {
    assert_eq!(variant_name("storefront", 0), "storefront-candidate-1");
    assert_eq!(
        fresh_baseline_name("storefront"),
        "storefront-fresh-baseline"
    );
    assert_eq!(variant_service_name("web", 4), "web-candidate-5");
    assert_eq!(fresh_baseline_service_name("web"), "web-fresh-baseline");
    assert_eq!(variant_label(2), "candidate-3");
    let long = "x".repeat(60);
    assert_eq!(variant_name(&long, 0).len(), MAX_CANDIDATE_NAME);
    assert_ne!(variant_name(&long, 0), variant_name(&long, 1));
    assert_eq!(fresh_baseline_name(&long).len(), MAX_CANDIDATE_NAME);
    // `{{pods}}` of the target and of the single candidate never catch a variant's pods.
    let pod = |d: &str| format!("{d}-7d9c5b8f4-x2k9q");
    let names = [
        "storefront".to_string(),
        candidate_name("storefront"),
        variant_name("storefront", 0),
        variant_name("storefront", 1),
        fresh_baseline_name("storefront"),
    ];
    for (i, a) in names.iter().enumerate() {
        let re = regex::Regex::new(&crate::analysis::pods_regex(a)).unwrap();
        for (j, b) in names.iter().enumerate() {
            assert_eq!(re.is_match(&pod(b)), i == j, "{a} vs {b}");
        }
    }
}
