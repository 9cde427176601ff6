//! What the mocked-API tests of every module answer with (the controller's fake API server,
//! kubectl-concurrency's scripted one, leader election's and the drain's): a JSON response and
//! the API server's `Status` body for a failed request, built the way a real one writes them.

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};

/// `value` as a JSON response with status `code`.
pub fn json_response(code: u16, value: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).expect("a test's HTTP status code"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(value.to_string().into_bytes()))
        .expect("a response from a valid status and header")
}

/// The API server's `Status` for a failed request (`reason` as in `metav1.StatusReason`).
pub fn api_status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
}

/// [`api_status`] as a response.
pub fn status_response(code: u16, reason: &str, message: &str) -> Response<Body> {
    json_response(code, &api_status(code, reason, message))
}

/// The request's `Content-Type`, as the mocked servers record it.
pub fn content_type<B>(request: &Request<B>) -> Option<String> {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}
