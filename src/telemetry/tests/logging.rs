use crate::telemetry::logging::*;

#[test]
fn rust_log_wins_over_configured_filter() {
    let f = env_filter(Some("debug"), "info").unwrap();
    assert_eq!(f.to_string(), "debug");
    let f = env_filter(Some("  "), "warn,concurrency_operator=debug").unwrap();
    assert_eq!(f.to_string(), "concurrency_operator=debug,warn");
    let f = env_filter(None, "info").unwrap();
    assert_eq!(f.to_string(), "info");
}

#[test]
fn bad_filter_names_its_source() {
    let err = env_filter(Some("foo=notalevel"), "info").unwrap_err();
    assert_eq!(err.category(), "LogFilterInvalid");
    let msg = err.to_string();
    assert!(
        msg.contains("RUST_LOG") && msg.contains("foo=notalevel"),
        "{msg}"
    );
    let err = env_filter(None, "x=[[").unwrap_err();
    assert!(err.to_string().contains("--log-filter"), "{err}");
}

#[test]
fn json_lines_carry_fields_and_respect_filter() {
    let logs = CapturedLogs::default();
    let filter = env_filter(None, "info").unwrap();
    let subscriber = build_subscriber(LogFormat::Json, filter, false, logs.clone());
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!(experiment = "shop/storefront", stage = 1, "stage advanced");
        tracing::debug!("filtered out");
    });
    let out = logs.contents();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["level"], "INFO");
    assert_eq!(v["message"], "stage advanced");
    assert_eq!(v["experiment"], "shop/storefront");
    assert_eq!(v["stage"], 1);
}

#[test]
fn text_format_is_one_readable_line() {
    let logs = CapturedLogs::default();
    let filter = env_filter(None, "info").unwrap();
    let subscriber = build_subscriber(LogFormat::Text, filter, false, logs.clone());
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(reason = "CheckFailed", "rolling back");
    });
    let out = logs.contents();
    assert!(out.contains("WARN"), "{out}");
    assert!(out.contains("rolling back"), "{out}");
    assert!(out.contains("reason=\"CheckFailed\""), "{out}");
    assert!(serde_json::from_str::<serde_json::Value>(out.trim()).is_err());
}
