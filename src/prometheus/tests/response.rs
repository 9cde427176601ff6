//! The answer of `/api/v1/query`, parsed without a Prometheus: one value, no data, or each
//! error as the analysis classifies it.

use std::time::Duration;

use crate::prometheus::response::parse_response;

const T: Duration = Duration::from_secs(7);

fn ok(body: &str) -> Option<f64> {
    parse_response(200, body.as_bytes(), T).unwrap()
}

fn category(status: u16, body: &str) -> &'static str {
    parse_response(status, body.as_bytes(), T)
        .unwrap_err()
        .category()
}

#[test]
fn one_value_from_a_scalar_or_a_single_series() {
    let scalar =
        r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000.5,"1.5"]}}"#;
    assert_eq!(ok(scalar), Some(1.5));
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"pod":"a","namespace":"shop"},"value":[1700000000,"0.25"]}]},"warnings":["w"]}"#;
    assert_eq!(ok(vector), Some(0.25));
    let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert_eq!(ok(empty), None, "no data");
    let nan = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
    assert!(ok(nan).is_some_and(f64::is_nan));
    let inf = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#;
    assert_eq!(ok(inf), Some(f64::INFINITY));
}

#[test]
fn several_series_a_matrix_or_a_string_are_not_one_value() {
    let two = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"pod":"a"},"value":[1,"1"]},{"metric":{"pod":"b"},"value":[1,"2"]}]}}"#;
    let e = parse_response(200, two.as_bytes(), T).unwrap_err();
    assert_eq!(e.category(), "QueryNotOneValue");
    assert!(e.to_string().contains("2 series"), "{e}");
    let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#;
    assert_eq!(category(200, matrix), "QueryNotOneValue");
    let string = r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#;
    assert_eq!(category(200, string), "QueryNotOneValue");
}

#[test]
fn prometheus_errors_are_classified_as_before() {
    let err = |kind: &str| {
        format!(r#"{{"status":"error","errorType":"{kind}","error":"it went wrong"}}"#)
    };
    assert_eq!(category(400, &err("bad_data")), "QueryRejected");
    let e = parse_response(400, err("bad_data").as_bytes(), T).unwrap_err();
    assert!(e.to_string().contains("it went wrong"), "{e}");
    assert_eq!(category(503, &err("timeout")), "PrometheusTimeout");
    assert_eq!(category(503, &err("canceled")), "PrometheusTimeout");
    let e = parse_response(422, err("execution").as_bytes(), T).unwrap_err();
    assert_eq!(e.category(), "PrometheusError");
    assert!(e.to_string().contains("execution: it went wrong"), "{e}");
}

#[test]
fn what_is_not_a_prometheus_answer_is_a_server_error_quoted_short() {
    let page = format!("<html>{}</html>", "bad gateway ".repeat(500));
    let e = parse_response(502, page.as_bytes(), T).unwrap_err();
    assert_eq!(e.category(), "PrometheusError");
    let text = e.to_string();
    assert!(text.contains("HTTP 502: <html>bad gateway"), "{text}");
    assert!(text.len() < 700, "quoted whole: {} bytes", text.len());
    assert_eq!(category(200, "{\"status\":"), "PrometheusError");
    let word = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"many"]}}"#;
    assert_eq!(category(200, word), "PrometheusError");
}

#[test]
fn refused_credentials_are_their_own_category() {
    let e = parse_response(401, b"Unauthorized\n", T).unwrap_err();
    assert_eq!(e.category(), "PrometheusUnauthorized");
    assert_eq!(
        e.to_string(),
        "Prometheus refused the credentials (HTTP 401): Unauthorized"
    );
    assert_eq!(category(403, "{}"), "PrometheusUnauthorized");
}

#[test]
fn error_text_is_cut_at_a_character_boundary() {
    // 3-byte characters: a cut in the middle of one would not be a string at all.
    let long = "é€".repeat(400);
    let body = format!(r#"{{"status":"error","errorType":"bad_data","error":"{long}"}}"#);
    let e = parse_response(400, body.as_bytes(), T).unwrap_err();
    let text = e.to_string();
    assert!(text.ends_with('…'), "{text}");
    assert!(text.len() < 600, "{} bytes", text.len());
}

#[test]
fn a_range_answer_is_one_series_of_timed_points_or_none() {
    use crate::prometheus::response::parse_range;
    let one = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{},"values":[[1700000000,"0.25"],[1700000020.5,"NaN"]]}]}}"#;
    let points = parse_range(200, one.as_bytes(), T).unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0], (1_700_000_000.0, 0.25));
    assert_eq!(points[1].0, 1_700_000_020.5);
    assert!(points[1].1.is_nan());
    let empty = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
    assert!(parse_range(200, empty.as_bytes(), T).unwrap().is_empty());
    let two = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"pod":"a"},"values":[[1,"1"]]},{"metric":{"pod":"b"},"values":[[1,"2"]]}]}}"#;
    let e = parse_range(200, two.as_bytes(), T).unwrap_err();
    assert_eq!(e.category(), "QueryNotOneValue", "{e}");
    let instant = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert!(parse_range(200, instant.as_bytes(), T).is_err());
    let bad = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
    assert_eq!(
        parse_range(400, bad.as_bytes(), T).unwrap_err().category(),
        "QueryRejected"
    );
}
