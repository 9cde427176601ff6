use crate::controller::status::*;
use serde_json::json;

#[test]
fn diff_sets_changes_and_nulls_what_went_away() {
    let old = json!({"phase": "Progressing", "stage": "1/3", "decision": {"a": 1},
                     "baseline": {"replicas": 6, "readyReplicas": 6}});
    let new = json!({"phase": "RollingBack", "stage": "1/3",
                     "baseline": {"replicas": 6, "readyReplicas": 5}, "message": "m"});
    assert_eq!(
        merge_diff(&old, &new),
        Some(json!({"phase": "RollingBack", "decision": null,
                    "baseline": {"readyReplicas": 5}, "message": "m"}))
    );
    assert_eq!(merge_diff(&old, &old), None);
}

#[test]
fn lists_are_replaced_whole() {
    let old = json!({"analyses": [1, 2]});
    let new = json!({"analyses": [2, 3]});
    assert_eq!(merge_diff(&old, &new), Some(json!({"analyses": [2, 3]})));
}
