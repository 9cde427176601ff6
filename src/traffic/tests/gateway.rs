use serde_json::{json, Value};

use crate::traffic::gateway::*;
use pretty_assertions::assert_eq;

const B: &str = "storefront-baseline";
const C: &str = "storefront-candidate";

/// Rule 0 sends /api to the target's Service, rule 1 sends /assets elsewhere, rule 2
/// redirects (no backendRefs).
fn route(api_refs: Value) -> Value {
    json!({
        "apiVersion": HTTPROUTE_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": {"name": "storefront", "namespace": "shop", "resourceVersion": "41"},
        "spec": {
            "parentRefs": [{"name": "gateway"}],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "backendRefs": api_refs},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/assets"}}],
                 "backendRefs": [{"name": "assets", "port": 8080}]},
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}]}
            ]
        }
    })
}

/// RFC 7386, as the API server applies a merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(fields), Some(changes)) => {
            for (key, value) in changes {
                if value.is_null() {
                    fields.remove(key);
                } else {
                    merge(fields.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// A stage's split: `weight` percent to the candidate Service, the rest to the baseline's.
fn two_way(route: &Value, weight: i32) -> Result<Value, crate::workload::WorkloadError> {
    split_route_patch(
        route,
        "storefront",
        &[B, C],
        &[(B, 100 - weight), (C, weight)],
    )
}

fn patched(route: &Value, weight: i32) -> Value {
    let mut next = route.clone();
    merge(&mut next, &two_way(route, weight).unwrap());
    next
}

#[test]
fn only_the_rule_sending_to_the_target_is_split() {
    let original = route(json!([{"name": "storefront", "port": 80}]));
    let patch = two_way(&original, 30).unwrap();
    assert_eq!(patch["metadata"], json!({"resourceVersion": "41"}));
    let rules = &patch["spec"]["rules"];
    assert_eq!(
        rules[0]["backendRefs"],
        json!([{"name": B, "port": 80, "weight": 70}, {"name": C, "port": 80, "weight": 30}])
    );
    assert_eq!(rules[0]["matches"], original["spec"]["rules"][0]["matches"]);
    assert_eq!(rules[1], original["spec"]["rules"][1]);
    assert_eq!(rules[2], original["spec"]["rules"][2]);
}

#[test]
fn stages_move_the_weights_and_read_back() {
    let original = route(json!([{"name": "storefront", "port": 80}]));
    assert_eq!(route_weight(&original, B, C), None);
    let mut current = original;
    for stage in [30, 70, 100] {
        current = patched(&current, stage);
        assert_eq!(route_weight(&current, B, C), Some(stage));
        assert_eq!(
            current["spec"]["rules"][0]["backendRefs"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
    assert_eq!(current["spec"]["rules"][0]["backendRefs"][0]["weight"], 0);
    assert_eq!(route_weight(&patched(&current, 0), B, C), Some(0));
}

#[test]
fn other_backends_keep_their_share_of_the_rule() {
    let original = route(json!([
        {"name": "storefront", "port": 80, "weight": 3},
        {"name": "legacy", "port": 80}
    ]));
    let weights = |r: &Value| -> Vec<(String, i64)> {
        r["spec"]["rules"][0]["backendRefs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["name"].as_str().unwrap().to_string(),
                    b["weight"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let first = patched(&original, 30);
    let expect = |b, c| {
        vec![
            (B.to_string(), b),
            (C.to_string(), c),
            ("legacy".to_string(), 100),
        ]
    };
    assert_eq!(weights(&first), expect(210, 90));
    let second = patched(&first, 70);
    assert_eq!(weights(&second), expect(90, 210));
    assert_eq!(route_weight(&second, B, C), Some(70));
}

#[test]
fn restore_puts_the_original_refs_back() {
    let original = route(json!([{"name": "storefront", "port": 80, "filters": []}]));
    let saved = route_backend_refs(&original).unwrap().to_string();
    assert_eq!(
        saved,
        r#"[[{"filters":[],"name":"storefront","port":80}],[{"name":"assets","port":8080}],null]"#
    );
    let split = patched(&patched(&original, 30), 70);
    assert_eq!(
        split["spec"]["rules"][0]["backendRefs"][1]["filters"],
        json!([])
    );
    let mut restored = split.clone();
    merge(
        &mut restored,
        &restore_route_patch(&split, &saved, "storefront", &[B, C]).unwrap(),
    );
    assert_eq!(restored, original);
}

/// Someone added and removed rules mid-flight: the saved refs no longer line up with the
/// rules, yet the restore needs no person — no saved refs are written into another rule, and
/// a rule that carries the split gets the target's Service back with its share.
#[test]
fn a_route_whose_rules_changed_mid_flight_is_restored_without_a_person() {
    let original = route(
        json!([{"name": "storefront", "port": 80, "filters": []}, {"name": "legacy", "port": 80}]),
    );
    let saved = route_backend_refs(&original).unwrap().to_string();
    let split = patched(&patched(&original, 30), 70);
    let restore = |route: &Value| {
        let mut restored = route.clone();
        merge(
            &mut restored,
            &restore_route_patch(route, &saved, "storefront", &[B, C]).unwrap(),
        );
        assert_eq!(route_weight(&restored, B, C), None, "{restored}");
        restored
    };
    // The /assets rule removed, an /admin rule added: as many rules as saved, misaligned.
    let mut swapped = split.clone();
    let rules = swapped["spec"]["rules"].as_array_mut().unwrap();
    rules.remove(1);
    let admin = json!({"matches": [{"path": {"type": "PathPrefix", "value": "/admin"}}],
                       "backendRefs": [{"name": "admin", "port": 80}]});
    rules.push(admin.clone());
    let restored = restore(&swapped);
    let rules = restored["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules[0], original["spec"]["rules"][0]);
    assert_eq!(
        rules[1], original["spec"]["rules"][2],
        "the redirect got no refs"
    );
    assert_eq!(rules[2], admin);
    // Only a rule removed: fewer rules than saved. The split is undone in place: the target's
    // Service back with its share (1 of 2, as before), the other backend's weight scaled
    // back, port and filters kept.
    let mut fewer = split.clone();
    fewer["spec"]["rules"].as_array_mut().unwrap().remove(1);
    let restored = restore(&fewer);
    let rules = restored["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0]["backendRefs"],
        json!([{"name": "storefront", "port": 80, "filters": [], "weight": 1},
               {"name": "legacy", "port": 80, "weight": 1}])
    );
    assert_eq!(rules[1], original["spec"]["rules"][2]);
    // Restored, it is left alone.
    assert_eq!(restore(&restored), restored);
}

#[test]
fn routes_that_cannot_be_split_or_restored_say_why() {
    let elsewhere = route(json!([
        {"name": "storefront", "port": 80, "namespace": "other"},
        {"name": "storefront", "port": 80, "kind": "ServiceImport", "group": "multicluster.x-k8s.io"}
    ]));
    let err = two_way(&elsewhere, 30).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.traffic.httpRoute: no rule of HTTPRoute storefront has a backendRef to Service storefront"
    );
    assert_eq!(err.category(), "ServiceNotInRoute");

    let empty = json!({"metadata": {"name": "r"}, "spec": {"rules": []}});
    assert_eq!(
        route_backend_refs(&empty).unwrap_err().category(),
        "InvalidRoute"
    );

    let original = route(json!([{"name": "storefront", "port": 80}]));
    assert_eq!(
        restore_route_patch(&original, "not json", "storefront", &[B, C])
            .unwrap_err()
            .category(),
        "InvalidOriginalRoute"
    );
}

const F: &str = "storefront-fresh-baseline";
const C1: &str = "storefront-candidate-1";
const C2: &str = "storefront-candidate-2";

fn apply(route: &Value, patch: &Value) -> Value {
    let mut next = route.clone();
    merge(&mut next, patch);
    next
}

#[test]
fn a_selection_splits_the_route_n_ways_and_a_stage_replaces_those_refs() {
    let ours = [B, C, F, C1, C2];
    let original = route(json!([
        {"name": "storefront", "port": 80, "weight": 3},
        {"name": "legacy", "port": 80, "weight": 1}
    ]));
    let select = |route: &Value, fresh: i32, c1: i32, c2: i32| {
        let backends = [(B, 100 - fresh - c1 - c2), (F, fresh), (C1, c1), (C2, c2)];
        let backends: Vec<_> = backends.into_iter().filter(|(_, w)| *w > 0).collect();
        apply(
            route,
            &split_route_patch(route, "storefront", &ours, &backends).unwrap(),
        )
    };
    let selecting = select(&original, 10, 10, 10);
    let refs = |r: &Value| {
        r["spec"]["rules"][0]["backendRefs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["name"].as_str().unwrap().to_string(),
                    b["weight"].as_i64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let named = |list: &[(&str, i64)]| {
        list.iter()
            .map(|(n, w)| (n.to_string(), *w))
            .collect::<Vec<_>>()
    };
    // The target's 3 of 4 parts go 70/10/10/10; `legacy` keeps its quarter (×100).
    assert_eq!(
        refs(&selecting),
        named(&[(B, 210), (F, 30), (C1, 30), (C2, 30), ("legacy", 100)])
    );
    assert_eq!(
        crate::traffic::route_shares(&selecting, &[B, F, C1, C2]),
        [70, 10, 10, 10]
    );
    // Candidate 1 eliminated: its ref goes, the others keep their share (the target's part
    // grows), and the rule's other backends are not scaled again.
    let eliminated = select(&selecting, 10, 0, 10);
    assert_eq!(
        refs(&eliminated),
        named(&[(B, 240), (F, 30), (C2, 30), ("legacy", 100)])
    );
    assert_eq!(
        crate::traffic::route_shares(&eliminated, &[B, F, C1, C2]),
        [80, 10, 0, 10]
    );
    // Stage 1 of the winner replaces every selection ref, the fresh baseline's too.
    let stage = apply(
        &eliminated,
        &split_route_patch(&eliminated, "storefront", &ours, &[(B, 70), (C, 30)]).unwrap(),
    );
    assert_eq!(refs(&stage), named(&[(B, 210), (C, 90), ("legacy", 100)]));
    assert_eq!(route_weight(&stage, B, C), Some(30));
}

#[test]
fn only_backends_that_start_receiving_traffic_need_endpoints_first() {
    let original = route(json!([{"name": "storefront", "port": 80}]));
    // The first split names both variant Services: both must have endpoints before it.
    assert_eq!(newly_weighted(&original, &[(B, 70), (C, 30)]), [B, C]);
    // Later stages only move weight between Services already receiving traffic.
    let stage1 = patched(&original, 30);
    assert!(newly_weighted(&stage1, &[(B, 30), (C, 70)]).is_empty());
    // At 100 % the baseline is at 0; lowering the candidate gives it traffic again.
    let at100 = patched(&stage1, 100);
    assert_eq!(newly_weighted(&at100, &[(B, 50), (C, 50)]), [B]);
    // A backend at weight 0 in the split starts nothing.
    assert!(newly_weighted(&original, &[(B, 100), (C, 0)]) == [B]);
}
