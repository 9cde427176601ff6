//! The fake API's EndpointSlice controller: a LIST of EndpointSlices by
//! `kubernetes.io/service-name` answers one slice with a ready endpoint for a stored Service,
//! unless the test named it in `FakeApi::without_endpoints` (a Service created a moment ago,
//! whose slice the real controller has not written yet).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::fixtures::SERVICES;

/// The list answered for `uri` (`…/endpointslices?labelSelector=…`).
pub fn endpoint_slices(objects: &BTreeMap<String, Value>, uri: &str, without: &[String]) -> Value {
    let service = uri
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.strip_prefix("labelSelector="))
        .map(|v| v.replace("%2F", "/").replace("%3D", "="))
        .find_map(|sel| {
            sel.strip_prefix("kubernetes.io/service-name=")
                .map(String::from)
        });
    let items: Vec<Value> = service
        .filter(|name| objects.contains_key(&format!("{SERVICES}/{name}")))
        .filter(|name| !without.contains(name))
        .map(|name| {
            json!({
                "metadata": {"name": format!("{name}-abcde"), "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": true}}],
            })
        })
        .into_iter()
        .collect();
    json!({"metadata": {}, "items": items})
}
