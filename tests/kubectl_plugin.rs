//! The `kubectl-concurrency` binary as kubectl runs it: a kubeconfig pointing at a fake API
//! server on loopback, then the exit code, stdout and stderr of real invocations. The
//! commands' logic is tested in `src/kubectl/tests/`; this checks what a shell sees: one
//! error line on stderr and a non-zero exit for not found, wrong phase and RBAC denials.

use std::net::SocketAddr;
use std::process::Output;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const PATH: &str = "/apis/concurrency.dev/v1alpha1/namespaces/shop/concurrencyexperiments";

fn experiment(phase: &str) -> Value {
    json!({
        "apiVersion": "concurrency.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "storefront-threads", "namespace": "shop", "resourceVersion": "7",
                     "creationTimestamp": "2026-11-30T01:00:00Z"},
        "spec": {
            "targetRef": {"name": "storefront"},
            "candidate": {"server": "puma", "workers": 2, "threads": 4},
            "analysis": {"prometheus": {"url": "http://prometheus:9090"},
                         "checks": [{"metric": "latency", "maxIncrease": "10%"}]},
        },
        "status": {"phase": phase, "stageIndex": 0, "stage": "1/3", "plannedWeight": 30, "effectiveWeight": 33},
    })
}

fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code,
           "details": {"name": "x", "group": "concurrency.dev", "kind": "concurrencyexperiments"}})
}

/// Answers GET and PATCH of experiments: `storefront-threads` exists (phase as given), any
/// other name is a 404, and every PATCH is denied by RBAC. Records `METHOD path` lines.
async fn fake_api(phase: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = calls.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let record = record.clone();
                    async move {
                        let method = req.method().to_string();
                        let path = req.uri().path().to_string();
                        let user = req
                            .headers()
                            .get("impersonate-user")
                            .and_then(|v| v.to_str().ok())
                            .map(|u| format!(" as {u}"))
                            .unwrap_or_default();
                        let _ = req.into_body().collect().await;
                        record
                            .lock()
                            .unwrap()
                            .push(format!("{method} {path}{user}"));
                        let name = path.strip_prefix(&format!("{PATH}/")).unwrap_or("");
                        let (code, body) = match (method.as_str(), name) {
                            ("GET", "storefront-threads") => (200, experiment(phase)),
                            ("GET", n) => (404, failure(404, "NotFound", &format!(
                                "concurrencyexperiments.concurrency.dev \"{n}\" not found"))),
                            ("PATCH", n) => (403, failure(403, "Forbidden", &format!(
                                "concurrencyexperiments.concurrency.dev \"{n}\" is forbidden: User \"dev\" cannot patch resource \"concurrencyexperiments\" in API group \"concurrency.dev\" in the namespace \"shop\""))),
                            _ => (405, failure(405, "MethodNotAllowed", "no")),
                        };
                        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
                        *r.status_mut() = StatusCode::from_u16(code).unwrap();
                        r.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, calls)
}

/// Runs the plugin with a kubeconfig whose context namespace is `shop`.
async fn plugin(addr: SocketAddr, args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!(
        "kubectl-concurrency-test-{}-{}",
        std::process::id(),
        addr.port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: fake, cluster: {{server: \"http://{addr}\"}}}}]\n\
             users: [{{name: dev, user: {{token: not-a-secret}}}}]\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: dev, namespace: shop}}}}]\n\
             current-context: fake\n"
        ),
    )
    .unwrap();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-concurrency"))
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("PROMETHEUS_URL")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    output
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_line_on_stderr_with_a_failing_exit_code() {
    let (addr, calls) = fake_api("Progressing").await;

    let o = plugin(addr, &["get", "nope"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: ConcurrencyExperiment \"nope\" not found in namespace \"shop\"\n"
    );
    assert_eq!(stdout(&o), "");

    // Wrong phase: refused before anything is written.
    let o = plugin(addr, &["approve", "storefront-threads"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: storefront-threads: is Progressing at stage 1/3; approve lifts a hold (phase \
         Paused with holdReason InconclusiveLimit, InsufficientCapacity or AwaitingApproval) or \
         the manual promotion at the last stage — nothing to approve\n"
    );
    let o = plugin(addr, &["retry", "storefront-threads", "-n", "shop"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "error: storefront-threads: the experiment is Progressing at stage 1/3 — only a \
         RolledBack experiment is retried (abort to roll it back, then retry once it is \
         RolledBack)\n"
    );

    // Allowed, but RBAC denies the patch.
    let o = plugin(addr, &["abort", "storefront-threads"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "error: permission denied (403, RBAC): cannot patch concurrencyexperiments in namespace \
         \"shop\": concurrencyexperiments.concurrency.dev \"storefront-threads\" is forbidden: \
         User \"dev\" cannot patch resource \"concurrencyexperiments\" in API group \
         \"concurrency.dev\" in the namespace \"shop\"\n"
    );

    let calls = calls.lock().unwrap().clone();
    let patches = calls.iter().filter(|c| c.starts_with("PATCH")).count();
    assert_eq!(patches, 1, "only abort got as far as a patch: {calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_prints_to_stdout_and_exits_zero() {
    let (addr, _) = fake_api("Progressing").await;
    let o = plugin(addr, &["get", "storefront-threads"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("Name:        storefront-threads\nNamespace:   shop\n"),
        "{out}"
    );
    assert!(
        out.contains("Stage:       1/3, weight 30% planned / 33% in force\n"),
        "{out}"
    );
    assert_eq!(stderr(&o), "");
    let o = plugin(addr, &["history", "storefront-threads"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("0 analyses kept in status"),
        "{}",
        stdout(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_impersonates_like_kubectl() {
    let (addr, calls) = fake_api("Progressing").await;
    let viewer = "system:serviceaccount:shop:viewer";
    let o = plugin(addr, &["get", "storefront-threads", "--as", viewer]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        calls.lock().unwrap().clone(),
        [format!("GET {PATH}/storefront-threads as {viewer}")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_are_clap_s_and_help_reads_as_a_kubectl_command() {
    let (addr, calls) = fake_api("Progressing").await;
    let o = plugin(addr, &["approve"]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("Usage: kubectl concurrency approve <NAME>"),
        "{}",
        stderr(&o)
    );
    let o = plugin(addr, &["--help"]).await;
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    for c in [
        "get",
        "approve",
        "abort",
        "retry",
        "pause",
        "resume",
        "history",
        "recommend",
        "init",
        "report",
        "dashboard",
    ] {
        assert!(
            help.contains(&format!("\n  {c} ")),
            "{c} missing in\n{help}"
        );
    }
    assert!(
        calls.lock().unwrap().is_empty(),
        "usage errors call nothing"
    );
}
