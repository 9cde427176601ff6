//! The dashboard's page (pure) and its Host guard.

use serde_json::json;

use super::fixtures::*;
use crate::kubectl::dashboard::own_host;
use crate::kubectl::dashboard::page::{page, rows};

#[test]
fn rows_are_sorted_and_say_what_waits_for_a_person() {
    let held = exp(edited(|v| {
        v["metadata"]["name"] = json!("a-held");
        v["status"]["phase"] = json!("Paused");
        v["status"]["holdReason"] = json!("AwaitingApproval");
    }));
    let (progressing, rolled_back) = (progressing(), rolled_back());
    let html = rows(&[&progressing, &rolled_back, &held], now());
    // shop/a-held first, then the two storefront-threads (same name: stable).
    let names: Vec<&str> = html
        .split(r#"data-name=""#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["a-held", "storefront-threads", "storefront-threads"]
    );
    assert!(html.contains(r#"<div class="hold">AwaitingApproval — all stages passed; `kubectl concurrency approve a-held` promotes the candidate into the target, `abort` rolls back</div>"#), "{html}");
    assert!(html.contains(
        r#"data-phase="Progressing" data-stage="2/3" data-planned="70" data-effective="67""#
    ));
    assert!(
        html.contains(
            r#"<span class="Pass" data-check="queueTime">queueTime 1.7ms / 1.9ms ✓</span>"#
        ),
        "{html}"
    );
    assert!(html.contains(
        r#"<span class="Fail" data-check="queueTime">queueTime 1.7ms / 459.2ms ✗</span>"#
    ));
    assert!(html.contains(r#"<a class="report" href="report/shop/storefront-threads">report</a>"#));
    assert!(rows(&[], now()).contains("No ConcurrencyExperiment here yet."));
    let full = page(&[&progressing], "namespace shop", now());
    assert!(full.contains("namespace shop · read-only"));
    assert!(full.contains("setInterval(refresh, 2000)"));
}

#[test]
fn only_its_own_address_is_a_host_it_answers() {
    let lo = "127.0.0.1:8080".parse().unwrap();
    assert!(own_host(Some("127.0.0.1:8080"), lo));
    assert!(own_host(Some("localhost:8080"), lo));
    assert!(own_host(Some("LOCALHOST:8080"), lo));
    assert!(!own_host(Some("localhost:9090"), lo));
    assert!(!own_host(Some("evil.example:8080"), lo));
    assert!(!own_host(None, lo));
    let lan = "10.1.2.3:8080".parse().unwrap();
    assert!(own_host(Some("10.1.2.3:8080"), lan));
    assert!(!own_host(Some("localhost:8080"), lan));
}
