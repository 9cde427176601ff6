//! A webhook receiver on 127.0.0.1 that records every request and answers with the statuses it
//! is given, and the files a Secret would mount.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::api::Phase;
use crate::notify::deliver::RetryPolicy;
use crate::notify::{Kind, Notification, Stage};
use crate::telemetry::Metrics;

/// One request as received: lowercase header names.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Status(u16),
    /// Read the request, never answer (the client's timeout ends it).
    Hang,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    /// The answer once `answers` is used up.
    then: Arc<Mutex<Answer>>,
}

impl Receiver {
    /// Answers `answers` in order, then `then` for ever.
    pub async fn start(answers: &[Answer], then: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/hooks/concurrency",
            listener.local_addr().unwrap()
        );
        let r = Receiver {
            url,
            received: Default::default(),
            answers: Arc::new(Mutex::new(answers.iter().copied().collect())),
            then: Arc::new(Mutex::new(then)),
        };
        let server = r.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let server = server.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut conn).await else {
                        return;
                    };
                    server.received.lock().unwrap().push(req);
                    let next = server.answers.lock().unwrap().pop_front();
                    let answer = next.unwrap_or(*server.then.lock().unwrap());
                    match answer {
                        Answer::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
                        Answer::Status(code) => {
                            let head = format!(
                                "HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                            let _ = conn.write_all(head.as_bytes()).await;
                            let _ = conn.shutdown().await;
                        }
                    }
                });
            }
        });
        r
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        path,
        headers,
        body: buf[head_end..].to_vec(),
    })
}

/// A file with `content` in a fresh directory (what a mounted Secret key looks like).
pub fn file(name: &str, content: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "concurrency-notify-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

/// Retries fast enough for a test: 10, 20, 40 ms…
pub fn fast(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        timeout: Duration::from_secs(2),
    }
}

pub fn notification(kind: Kind, n: i32) -> Notification {
    Notification {
        id: format!("uid-1/{kind}/{n}/2026-12-01T04:44:40Z"),
        kind,
        at: "2026-12-01T04:44:40Z".parse().unwrap(),
        namespace: "shop".into(),
        name: "storefront-threads".into(),
        uid: "uid-1".into(),
        target: "storefront".into(),
        phase: Phase::Progressing,
        stage: Some(Stage {
            index: n,
            count: 3,
            planned_weight: 70,
            effective_weight: 67,
        }),
        baseline: Some("puma 2×6".into()),
        candidate: "puma 2×4".into(),
        reason: kind.as_str().into(),
        message: "m".into(),
        decision: None,
        checks: Vec::new(),
    }
}

/// `concurrency_notifications_total{sink, result}`, 0 when absent.
pub fn count(metrics: &Metrics, sink: &str, result: &str) -> u64 {
    let line = format!("concurrency_notifications_total{{sink=\"{sink}\",result=\"{result}\"}} ");
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&line).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// Waits (up to 5 s) until `done` holds.
pub async fn eventually(mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(done(), "not reached within 5 s");
}
