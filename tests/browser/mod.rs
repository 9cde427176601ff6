//! A real browser for the browser tests: Debian's Chromium headless, driven over WebDriver by
//! its chromedriver (plain HTTP and JSON, so no client crate). Used by the report's and the
//! dashboard's tests: open a page, run a script that reads the rendered DOM, keep a screenshot.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use concurrency_operator::api::ConcurrencyExperiment;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser tests can run here. On CI (`CI=true`, where scripts/install-deps
/// installs both) their absence is a failure, not a skip.
pub fn available(test: &str) -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: Chromium and chromedriver are not installed (scripts/install-deps installs them)"
        );
        eprintln!(
            "{test}: skipped, no {CHROMIUM} / {CHROMEDRIVER} (scripts/install-deps installs them)"
        );
    }
    present
}

/// Where screenshots are kept: `artifacts/browser/` in the checkout (kept after a CI run).
pub fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts/browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One headless Chromium session; the driver and the browser end when it is dropped.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver's Chromium outlives a killed driver: the whole process group goes.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    pub async fn start() -> Browser {
        let port = free_port();
        use std::os::unix::process::CommandExt;
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            // Its own process group, so that dropping the browser ends Chromium too.
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = http.get(format!("{base}/status")).send().await;
            if let Ok(r) = ready {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile =
            std::env::temp_dir().join(format!("cexp-chromium-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&profile).unwrap();
        // The machine has no network but loopback: without the background-networking flags
        // Chromium keeps trying Google's hosts.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1000,1400",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let mut b = Browser {
            driver,
            base,
            session: String::new(),
            http,
            _profile: TempDir(profile),
        };
        let v = b.call("POST", "/session", Some(caps)).await;
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        b
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "POST" => self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body.unwrap_or(json!({})).to_string()),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let resp = req
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("chromedriver answers");
        let status = resp.status();
        let bytes = resp.bytes().await.unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v["value"].clone()
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Opens `url` and waits for it to load (WebDriver's navigation waits for the load event).
    pub async fn open(&self, url: &str) {
        self.call("POST", &self.path("/url"), Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `return` a value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            &self.path("/execute/sync"),
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Ends the session (Chromium quits); dropping the browser then ends the driver.
    pub async fn quit(self) {
        let path = self.path("");
        self.call("DELETE", &path, None).await;
    }

    /// A PNG of the viewport, written to `artifacts/browser/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let v = self.call("GET", &self.path("/screenshot"), None).await;
        let png = base64_decode(v.as_str().expect("base64 PNG"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        let path = artifacts().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

/// Standard base64, as WebDriver sends screenshots (no crate for 20 lines).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes() {
        let Some(v) = value(c) else { continue };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// A rolled-back experiment: Puma 2×6 → 1×1, queue time over its max at stage 1.
pub fn experiment() -> ConcurrencyExperiment {
    serde_json::from_value(experiment_json()).unwrap()
}

/// The same as the API server sends it.
pub fn experiment_json() -> Value {
    let check = |name: &str, b: f64, c: f64, verdict: &str| {
        json!({"name": name, "baseline": b, "candidate": c, "verdict": verdict, "limit": "",
               "reason": format!("{name} {verdict}")})
    };
    json!({
        "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "one-thread", "namespace": "demo", "creationTimestamp": "2026-12-01T10:00:00Z"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 1, "threads": 1},
            "stages": [{"weight": 30, "duration": "1m"}, {"weight": 70, "duration": "1m"}, {"weight": 100, "duration": "1m"}],
            "analysis": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "interval": "20s",
                "checks": [
                    {"metric": "latency", "quantile": 0.9, "maxIncrease": "50%", "max": "250ms"},
                    {"metric": "queueTime", "quantile": 0.9, "max": "50ms"},
                ],
            },
        },
        "status": {
            "phase": "RolledBack", "stageIndex": 0, "stage": "1/3",
            "baseline": {"deployment": "storefront", "summary": "puma 2×4", "config": {"server": "puma", "workers": 2, "threads": 4}},
            "candidate": {"deployment": "storefront-candidate", "summary": "puma 1×1", "config": {"server": "puma", "workers": 1, "threads": 1}},
            "analyses": [
                {"at": "2026-12-01T10:01:00Z", "stageIndex": 0, "weight": 33, "verdict": "Pass",
                 "checks": [check("latency", 0.0651, 0.0662, "Pass"), check("queueTime", 0.0021, 0.031, "Pass")]},
                {"at": "2026-12-01T10:01:20Z", "stageIndex": 0, "weight": 33, "verdict": "Fail",
                 "checks": [check("latency", 0.0655, 0.0671, "Pass"), check("queueTime", 0.0022, 0.4125, "Fail")]},
            ],
            "decision": {"action": "Rollback", "reason": "CheckFailed", "at": "2026-12-01T10:01:21Z",
                         "message": "queueTime: candidate 412.5ms is above max 50ms (baseline 2.2ms)"},
        },
    })
}
