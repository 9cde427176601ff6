use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

use crate::prometheus::provider::Auth;
use crate::prometheus::{
    PrometheusClient, Provider, DEFAULT_TIMEOUT, MAX_IN_FLIGHT, MAX_RESPONSE_BYTES,
};

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

/// A loopback HTTP/1.1 server: each connection's request head is recorded, then `answer`
/// writes the response (and may stream as long as the client reads).
async fn http_server<F, Fut>(answer: F) -> (String, Arc<Mutex<Vec<String>>>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (answer, record) = (answer.clone(), record.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                record
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&request).into_owned());
                answer(s).await;
            });
        }
    });
    (url, seen)
}

const SCALAR: &str =
    r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"2.5"]}}"#;

async fn respond(mut s: tokio::net::TcpStream, head: &str, body: &str) {
    use tokio::io::AsyncWriteExt;
    let response = format!(
        "HTTP/1.1 {head}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(response.as_bytes()).await;
}

#[tokio::test]
async fn a_huge_answer_is_given_up_at_the_cap() {
    use tokio::io::AsyncWriteExt;
    const HUGE: usize = 50 * 1024 * 1024;
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    // A million-series vector as Prometheus would stream it: no Content-Length, 50 MiB.
    let (url, _) = http_server(move |mut s| {
        let counter = counter.clone();
        async move {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n\
                        {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let series = "{\"metric\":{\"__name__\":\"up\",\"pod\":\"p\"},\"value\":[1,\"1\"]},";
            let chunk = series.repeat(64 * 1024 / series.len());
            while counter.load(Ordering::SeqCst) < HUGE {
                if s.write_all(chunk.as_bytes()).await.is_err() {
                    return; // the client hung up
                }
                counter.fetch_add(chunk.len(), Ordering::SeqCst);
            }
        }
    })
    .await;
    let c = PrometheusClient::new(&url, Duration::from_secs(20)).unwrap();
    let e = c
        .query_value("{__name__=~\".+\"}", Timestamp::now())
        .await
        .unwrap_err();
    assert_eq!(e.category(), "PrometheusResponseTooLarge", "{e}");
    let text = e.to_string();
    assert!(text.contains(&MAX_RESPONSE_BYTES.to_string()), "{text}");
    assert!(text.contains("must return one series"), "{text}");
    // Given up early: what the server got out is the cap plus socket buffers, not 50 MiB.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let out = sent.load(Ordering::SeqCst);
    assert!(out < HUGE / 2, "the client read on: {out} bytes sent");
}

#[tokio::test]
async fn a_declared_huge_length_is_refused_before_reading() {
    use tokio::io::AsyncWriteExt;
    let (url, _) = http_server(|mut s| async move {
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n";
        let _ = s.write_all(head.as_bytes()).await;
        // Then nothing: a client waiting for the body would time out instead.
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let c = PrometheusClient::new(&url, Duration::from_secs(5)).unwrap();
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusResponseTooLarge", "{e}");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_its_target_is_redacted() {
    let (url, seen) = http_server(|s| async move {
        let head = "302 Found\r\nLocation: http://admin:hunter2@169.254.169.254/latest/meta-data";
        respond(s, head, "").await;
    })
    .await;
    let c = PrometheusClient::new(&url, DEFAULT_TIMEOUT).unwrap();
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusRedirect", "{e}");
    let text = e.to_string();
    assert!(text.contains("HTTP 302"), "{text}");
    assert!(text.contains("http://REDACTED@169.254.169.254/"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert_eq!(seen.lock().unwrap().len(), 1, "followed the redirect");
}

#[tokio::test]
async fn userinfo_becomes_basic_auth_and_never_appears_in_errors() {
    let (url, seen) = http_server(|s| respond(s, "200 OK", SCALAR)).await;
    let with_user = url.replace("http://", "http://alice:s%40cret@");
    let c = PrometheusClient::new(&with_user, DEFAULT_TIMEOUT).unwrap();
    assert_eq!(c.url(), url.replace("http://", "http://REDACTED@"));
    assert_eq!(
        c.query_value("up", Timestamp::now()).await.unwrap(),
        Some(2.5)
    );
    let request = seen.lock().unwrap()[0].to_lowercase();
    // base64("alice:s@cret")
    assert!(
        request.contains("authorization: basic ywxpy2u6c0bjcmv0"),
        "{request}"
    );
    assert!(
        !request.contains("alice"),
        "userinfo sent in the request line: {request}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = PrometheusClient::new(
        &format!("http://alice:hunter2@127.0.0.1:{closed}"),
        DEFAULT_TIMEOUT,
    )
    .unwrap();
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusUnreachable", "{e}");
    assert!(!format!("{e} {e:?} {c:?}").contains("hunter2"), "{e:?}");
    let e = PrometheusClient::new("http://alice:hunter2@exa mple", DEFAULT_TIMEOUT).unwrap_err();
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

#[tokio::test]
async fn a_provider_sends_its_token_file_headers_and_path_prefix() {
    let (url, seen) = http_server(|s| respond(s, "200 OK", SCALAR)).await;
    let dir = std::env::temp_dir().join(format!("cexp-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "first\n").unwrap();
    let provider = Provider {
        url: format!("{url}/prometheus/"),
        auth: Auth::BearerTokenFile(token.clone()),
        headers: [("X-Scope-OrgID".to_string(), "team-a".to_string())].into(),
        ..Default::default()
    };
    let c = PrometheusClient::for_provider(&provider, DEFAULT_TIMEOUT).unwrap();
    assert_eq!(
        c.query_value("up", Timestamp::now()).await.unwrap(),
        Some(2.5)
    );
    // Rotated: the next query reads the file again.
    std::fs::write(&token, "second").unwrap();
    assert_eq!(
        c.query_value("up", Timestamp::now()).await.unwrap(),
        Some(2.5)
    );
    let requests = seen.lock().unwrap().clone();
    assert!(
        requests[0].starts_with("GET /prometheus/api/v1/query?query=up&time="),
        "{}",
        requests[0]
    );
    let lower = |r: &str| r.to_lowercase();
    assert!(
        lower(&requests[0]).contains("authorization: bearer first\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        lower(&requests[0]).contains("x-scope-orgid: team-a\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        lower(&requests[1]).contains("authorization: bearer second\r\n"),
        "{}",
        requests[1]
    );

    std::fs::remove_file(&token).unwrap();
    let e = c.query_value("up", Timestamp::now()).await.unwrap_err();
    assert_eq!(e.category(), "PrometheusCredentials", "{e}");
    assert!(e.to_string().contains(&token.display().to_string()), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_long_query_goes_as_a_post_form() {
    let (url, seen) = http_server(|s| respond(s, "200 OK", SCALAR)).await;
    let c = PrometheusClient::new(&url, DEFAULT_TIMEOUT).unwrap();
    let long = format!("sum(up{{pod=~\"{}\"}})", "a|".repeat(3000));
    assert_eq!(
        c.query_value(&long, Timestamp::now()).await.unwrap(),
        Some(2.5)
    );
    let request = seen.lock().unwrap()[0].clone();
    assert!(
        request.starts_with("POST /api/v1/query HTTP/1.1"),
        "{request}"
    );
}

#[tokio::test]
async fn queries_to_one_endpoint_are_bounded_and_wait_within_their_timeout() {
    // Accepts and never answers: every query holds its slot until its timeout.
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let (url, _) = http_server(move |s| {
        count.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(s);
        }
    })
    .await;
    let c = PrometheusClient::new(&url, Duration::from_secs(3)).unwrap();
    let queries = (0..MAX_IN_FLIGHT + 3).map(|_| c.query_value("up", Timestamp::now()));
    // While every slot is held (well before the 3 s timeout), no more than MAX_IN_FLIGHT
    // requests reach the server; the others wait for a slot.
    let watch = async {
        let started = std::time::Instant::now();
        while accepted.load(Ordering::SeqCst) < MAX_IN_FLIGHT
            && started.elapsed() < Duration::from_millis(2500)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        accepted.load(Ordering::SeqCst)
    };
    let (answers, in_flight) = tokio::join!(futures::future::join_all(queries), watch);
    assert_eq!(
        in_flight, MAX_IN_FLIGHT,
        "requests in flight at once while all slots were held"
    );
    for answer in answers {
        assert_eq!(answer.unwrap_err().category(), "PrometheusTimeout");
    }
}

#[tokio::test]
async fn a_range_query_asks_for_start_end_and_step_and_bounds_its_points() {
    let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[100,"1"],[120,"2"]]}]}}"#;
    let (url, seen) = http_server(move |s| respond(s, "200 OK", matrix)).await;
    let c = PrometheusClient::new(&format!("{url}/prom"), DEFAULT_TIMEOUT).unwrap();
    let start = Timestamp::from_second(100).unwrap();
    let end = Timestamp::from_second(120).unwrap();
    let points = c
        .query_range("up", start, end, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(points, vec![(100.0, 1.0), (120.0, 2.0)]);
    let request = seen.lock().unwrap()[0].clone();
    assert!(
        request.starts_with(
            "GET /prom/api/v1/query_range?query=up&start=100.000&end=120.000&step=20&timeout="
        ),
        "{request}"
    );
    // A year every second: refused before anything is sent.
    let e = c
        .query_range(
            "up",
            start,
            Timestamp::from_second(100 + 365 * 86_400).unwrap(),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("11000 points"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}
