use std::time::Duration;

use jiff::Timestamp;

use crate::prometheus::{PrometheusClient, DEFAULT_TIMEOUT};

#[test]
fn urls_are_checked_up_front() {
    let e = PrometheusClient::new("not a url", DEFAULT_TIMEOUT).unwrap_err();
    assert_eq!(e.category(), "PrometheusURLInvalid");
    assert!(e.to_string().contains("not a url"), "{e}");
    assert!(PrometheusClient::new("http://127.0.0.1:9090", DEFAULT_TIMEOUT).is_ok());
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    // Bind then drop: the port was free a moment ago and nothing listens now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = PrometheusClient::new(&format!("http://127.0.0.1:{port}"), DEFAULT_TIMEOUT).unwrap();
    let timed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = timed.clone();
    let c = c.timed(std::sync::Arc::new(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusUnreachable", "{e}");
    assert_eq!(
        timed.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a failed query is timed too"
    );
}

#[tokio::test]
async fn a_silent_server_times_out() {
    // Accepts the connection, never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            open.push(s);
        }
    });
    let c = PrometheusClient::new(
        &format!("http://127.0.0.1:{port}"),
        Duration::from_millis(300),
    )
    .unwrap();
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusTimeout", "{e}");
    hold.abort();
}

/// Marks the child process of `without_a_ca_bundle_http_works_and_https_is_refused`.
const NO_CA_CHILD: &str = "CONCURRENCY_OPERATOR_TEST_NO_CA_CHILD";

/// An image without a CA bundle (scratch, distroless/static) must not crash the operator:
/// reqwest's `Client::new()` panics when no root certificates load. rustls-native-certs
/// reads only `SSL_CERT_FILE`/`SSL_CERT_DIR` when they are set, and environment variables
/// are process-wide, so this test runs itself again in a child process where both point
/// nowhere.
#[tokio::test]
async fn without_a_ca_bundle_http_works_and_https_is_refused() {
    if std::env::var_os(NO_CA_CHILD).is_some() {
        return without_ca_bundle().await;
    }
    let module = module_path!().split_once("::").unwrap().1;
    let name = format!("{module}::without_a_ca_bundle_http_works_and_https_is_refused");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(NO_CA_CHILD, "1")
        .env(
            "SSL_CERT_FILE",
            "/nonexistent/concurrency-operator-test/ca.pem",
        )
        .env(
            "SSL_CERT_DIR",
            "/nonexistent/concurrency-operator-test/certs",
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child without CA bundle:\n{stdout}\n{stderr}"
    );
}

async fn without_ca_bundle() {
    let e = PrometheusClient::new("https://prometheus.example:9090", DEFAULT_TIMEOUT).unwrap_err();
    assert_eq!(e.category(), "PrometheusClientSetup", "{e}");
    let text = e.to_string();
    assert!(text.contains("No CA certificates were loaded"), "{text}");
    assert!(text.contains("https://prometheus.example:9090"), "{text}");
    let e = PrometheusClient::new("not a url", DEFAULT_TIMEOUT).unwrap_err();
    assert_eq!(e.category(), "PrometheusURLInvalid", "{e}");
    // A plain http URL needs no roots: a real query against a canned Prometheus answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "request ended early");
            request.extend_from_slice(&buf[..n]);
        }
        let body =
            r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1.5"]}}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(response.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    let c = PrometheusClient::new(&format!("http://127.0.0.1:{port}"), DEFAULT_TIMEOUT).unwrap();
    assert_eq!(
        c.query_value("up", Timestamp::now()).await.unwrap(),
        Some(1.5)
    );
    let request = server.await.unwrap();
    assert!(request.starts_with("GET /api/v1/query?"), "{request}");
}
