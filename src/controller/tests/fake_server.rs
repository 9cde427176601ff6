//! The fake API server's answers (see [`FakeApi`]): a request in, the stored objects read or
//! changed with the API server's semantics the controller relies on, a response out.

use http::{Request, Response};
use kube::client::Body;
use serde_json::{json, Value};

use super::fixtures::{Call, FakeApi};
use crate::test_api::{content_type, json_response, status_response};

/// Collections the fake answers LIST calls for.
const LISTED: [&str; 3] = ["services", "replicasets", "pods"];

impl FakeApi {
    pub(super) async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().to_string();
        let uri = request.uri().to_string();
        let content_type = content_type(&request);
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        // Least privilege, proven: a call the chart's RBAC would refuse fails the test here,
        // whether or not the code under test would have tolerated the 403.
        if let Some(req) = crate::rbac::request_of(&method, &uri) {
            let granted = crate::rbac::grants(crate::rbac::OPERATOR);
            assert!(
                granted.contains(&req),
                "the operator called {method} {uri}, which needs `{} {}/{}`: not in \
                 rbac::OPERATOR (and so not granted by the chart)",
                req.2,
                if req.0.is_empty() { "core" } else { &req.0 },
                req.1
            );
        }
        self.calls.lock().unwrap().push(Call {
            method: method.clone(),
            uri: uri.clone(),
            content_type: content_type.clone(),
            body: body.clone(),
        });
        let path = uri.split('?').next().unwrap_or_default().to_string();
        let key = path.strip_suffix("/status").unwrap_or(&path).to_string();
        let mut objects = self.objects.lock().unwrap();
        match method.as_str() {
            "GET" if key.ends_with("/endpointslices") => {
                let without = self.without_endpoints.lock().unwrap().clone();
                let list = super::endpoints::endpoint_slices(&objects, &uri, &without);
                json_response(200, &list)
            }
            "GET" => match objects.get(&key) {
                Some(obj) => json_response(200, obj),
                None if LISTED.iter().any(|r| key.ends_with(&format!("/{r}"))) => {
                    // A list: every stored object directly under the collection path.
                    let prefix = format!("{key}/");
                    let items: Vec<&Value> = objects
                        .iter()
                        .filter(|(k, _)| k.strip_prefix(&prefix).is_some_and(|n| !n.contains('/')))
                        .map(|(_, v)| v)
                        .collect();
                    json_response(200, &json!({"metadata": {}, "items": items}))
                }
                None => status_response(404, "NotFound", &format!("{path}: NotFound")),
            },
            "DELETE" => match objects.get(&key) {
                Some(obj)
                    if body
                        .pointer("/preconditions/uid")
                        .is_some_and(|uid| Some(uid) != obj.pointer("/metadata/uid")) =>
                {
                    status_response(409, "Conflict", &format!("{path}: Conflict"))
                }
                Some(_) => {
                    objects.remove(&key);
                    json_response(200, &json!({"kind": "Status", "status": "Success"}))
                }
                None => status_response(404, "NotFound", &format!("{path}: NotFound")),
            },
            "POST" => json_response(201, &body),
            "PATCH" => {
                let ct = content_type.unwrap_or_default();
                let mut obj = objects.get(&key).cloned().unwrap_or(Value::Null);
                if ct.starts_with("application/apply-patch") {
                    let stored = obj.pointer("/metadata/uid").cloned();
                    let applied = body.pointer("/metadata/uid").cloned();
                    if stored.is_some() && applied.is_some() && stored != applied {
                        return status_response(422, "Invalid", &format!("{path}: Invalid"));
                    }
                    let version = self.version.load(std::sync::atomic::Ordering::SeqCst);
                    let uid = stored.unwrap_or_else(|| json!(format!("uid-{version}")));
                    obj = body;
                    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("uid".into(), uid);
                    }
                } else if ct.starts_with("application/json-patch") {
                    if obj.is_null() {
                        return status_response(404, "NotFound", &format!("{path}: NotFound"));
                    }
                    // The API server adds no finalizer to an object being deleted (422).
                    let finalizers = |o: &Value| o.pointer("/metadata/finalizers").cloned();
                    let before = finalizers(&obj);
                    let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
                    let ops: json_patch::Patch =
                        serde_json::from_value(apiserver_test_semantics(&obj, body)).unwrap();
                    if json_patch::patch(&mut obj, &ops).is_err() {
                        return status_response(422, "Invalid", &format!("{path}: Invalid"));
                    }
                    let count = |f: Option<Value>| f.and_then(|f| f.as_array().map(Vec::len));
                    if deleting && count(finalizers(&obj)) > count(before) {
                        return status_response(
                            422,
                            "Invalid",
                            &format!("{path}: no new finalizers can be added if the object is being deleted"),
                        );
                    }
                } else {
                    if obj.is_null() {
                        return status_response(404, "NotFound", &format!("{path}: NotFound"));
                    }
                    let expected = body.pointer("/metadata/resourceVersion").cloned();
                    let stored = obj.pointer("/metadata/resourceVersion").cloned();
                    if expected.is_some() && expected != stored {
                        return status_response(409, "Conflict", &format!("{path}: Conflict"));
                    }
                    json_patch::merge(&mut obj, &body);
                }
                // Every write is a new resourceVersion, as on a real API server.
                let version = self
                    .version
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), json!(version.to_string()));
                }
                objects.insert(key, obj.clone());
                json_response(200, &obj)
            }
            _ => status_response(
                405,
                "MethodNotAllowed",
                &format!("{path}: MethodNotAllowed"),
            ),
        }
    }
}

/// The API server's JSON patch `test` of `null` succeeds on a missing path (that is how a
/// first finalizer is added safely); the json-patch crate's does not, so such tests are dropped
/// here when the path is indeed missing.
fn apiserver_test_semantics(obj: &Value, ops: Value) -> Value {
    let Value::Array(ops) = ops else { return ops };
    Value::Array(
        ops.into_iter()
            .filter(|op| {
                let missing = op["path"]
                    .as_str()
                    .is_some_and(|p| obj.pointer(p).is_none());
                !(op["op"] == "test" && op["value"].is_null() && missing)
            })
            .collect(),
    )
}
