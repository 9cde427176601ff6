//! `kubectl concurrency dashboard` in a real browser (headless Chromium): the experiments in
//! view as rows, a hold waiting for a person with the command that continues it, a change in
//! the cluster shown without reloading the page, a report a click away; and the server's
//! guards (GET only, its own Host only).

mod browser;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use concurrency_operator::api::ConcurrencyExperiment;
use concurrency_operator::kubectl::dashboard::{serve, Source};
use concurrency_operator::kubectl::report::history::History;
use concurrency_operator::kubectl::report::page;

/// Experiments the test changes while the page is open; reports drawn from status alone.
struct Fake(Mutex<Vec<Arc<ConcurrencyExperiment>>>);

impl Source for Fake {
    fn experiments(&self) -> Vec<Arc<ConcurrencyExperiment>> {
        self.0.lock().unwrap().clone()
    }
    fn scope(&self) -> String {
        "all namespaces".into()
    }
    fn report(&self, ns: String, name: String) -> BoxFuture<'static, Result<String, String>> {
        let exp = self.experiments().into_iter().find(|e| {
            e.metadata.namespace.as_deref() == Some(&ns)
                && e.metadata.name.as_deref() == Some(&name)
        });
        Box::pin(async move {
            let exp = exp.ok_or("no such experiment")?;
            let now = "2026-12-01T10:05:00Z".parse().unwrap();
            let history = History {
                from: "2026-12-01T10:00:00Z".parse().unwrap(),
                to: now,
                step: Duration::from_secs(10),
                prometheus: "none".into(),
                checks: vec![],
                load: vec![],
                weight: Ok(vec![]),
                verdicts: vec![],
                stage: Ok(vec![]),
            };
            Ok(page::render(&exp, &history, now))
        })
    }
}

fn exp(v: Value) -> Arc<ConcurrencyExperiment> {
    Arc::new(serde_json::from_value(v).unwrap())
}

/// `storefront-threads` in `shop`, all stages passed, held for a person's approval.
fn held() -> Value {
    let mut v = browser::experiment_json();
    v["metadata"]["name"] = json!("storefront-threads");
    v["metadata"]["namespace"] = json!("shop");
    v["spec"]["candidate"] = json!({"server": "puma", "workers": 2, "threads": 4});
    let s = &mut v["status"];
    s["phase"] = json!("Paused");
    s["holdReason"] = json!("AwaitingApproval");
    s["stageIndex"] = json!(2);
    s["stage"] = json!("3/3");
    s["plannedWeight"] = json!(100);
    s["effectiveWeight"] = json!(100);
    s["candidate"]["summary"] = json!("puma 2×4");
    s["decision"] = Value::Null;
    s["analyses"][1]["verdict"] = json!("Pass");
    s["analyses"][1]["checks"][1]["verdict"] = json!("Pass");
    s["analyses"][1]["checks"][1]["candidate"] = json!(0.0031);
    v
}

async fn start(source: Arc<Fake>) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, source, stop.clone()));
    (url, stop)
}

#[tokio::test]
async fn the_dashboard_lists_experiments_live_and_links_their_reports() {
    if !browser::available("dashboard_browser") {
        return;
    }
    let source = Arc::new(Fake(Mutex::new(vec![
        exp(browser::experiment_json()),
        exp(held()),
    ])));
    let (url, stop) = start(source.clone()).await;
    let b = browser::Browser::start().await;
    b.open(&url).await;
    let rows = r#"
        window.notReloaded = true;
        return [...document.querySelectorAll('#rows tr[data-name]')].map(r => ({
          ns: r.dataset.namespace, name: r.dataset.name, phase: r.dataset.phase,
          stage: r.dataset.stage, effective: r.dataset.effective,
          checks: [...r.querySelectorAll('.checks span')].map(s => s.innerText),
          hold: [...r.querySelectorAll('.hold')].map(h => h.innerText),
          report: r.querySelector('a.report').getAttribute('href'),
        }));
    "#;
    let seen = b.eval(rows).await;
    let list = seen.as_array().unwrap();
    assert_eq!(list.len(), 2, "{seen:#}");
    // Sorted by namespace: demo/one-thread, then shop/storefront-threads.
    assert_eq!(list[0]["name"], "one-thread", "{seen:#}");
    assert_eq!(list[0]["phase"], "RolledBack");
    assert_eq!(list[0]["report"], "report/demo/one-thread");
    assert_eq!(
        list[0]["checks"],
        json!(["latency 65.5ms / 67.1ms ✓", "queueTime 2.2ms / 412.5ms ✗"]),
        "{seen:#}"
    );
    assert_eq!(list[1]["name"], "storefront-threads");
    assert_eq!(list[1]["stage"], "3/3");
    assert_eq!(list[1]["effective"], "100");
    let hold = list[1]["hold"][0].as_str().unwrap();
    assert!(
        hold.starts_with("AwaitingApproval — all stages passed; `kubectl concurrency approve storefront-threads` promotes"),
        "{hold}"
    );
    b.screenshot("dashboard").await;

    // The person approves; the operator promotes: the page shows it without being reloaded.
    {
        let mut v = held();
        v["status"]["phase"] = json!("Succeeded");
        v["status"]["holdReason"] = Value::Null;
        v["status"]["decision"] = json!({"action": "Promote", "reason": "Approved", "at": "2026-12-01T10:04:00Z", "message": "approved"});
        let mut list = source.0.lock().unwrap();
        list[1] = exp(v);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = b
            .eval("return [window.notReloaded === true, document.querySelector('tr[data-name=\"storefront-threads\"]').dataset.phase, document.querySelectorAll('tr[data-name=\"storefront-threads\"] .hold').length];")
            .await;
        if now == json!([true, "Succeeded", 0]) {
            break;
        }
        assert_eq!(now[0], json!(true), "the page was reloaded");
        assert!(
            Instant::now() < deadline,
            "the page still shows {now} after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A click away: the report of one of them.
    b.eval("document.querySelector('tr[data-name=\"one-thread\"] a.report').click(); return null;")
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = b
            .eval("return [location.pathname, document.querySelectorAll('figure[data-chart]').length, (document.getElementById('decision') || {}).innerText || ''];")
            .await;
        if r[0] == "/report/demo/one-thread" && r[1].as_u64().unwrap_or(0) >= 3 {
            assert!(
                r[2].as_str()
                    .unwrap()
                    .starts_with("Rolled back (CheckFailed)"),
                "{r}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no report after 20 s: {r}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    b.quit().await;
    stop.cancel();
}

#[tokio::test]
async fn the_dashboard_is_read_only_and_answers_only_its_own_host() {
    let source = Arc::new(Fake(Mutex::new(vec![exp(held())])));
    let (url, stop) = start(source).await;
    let http = reqwest::Client::new();
    let get = http.get(format!("{url}rows")).send().await.unwrap();
    assert_eq!(get.status(), 200);
    assert!(get
        .text()
        .await
        .unwrap()
        .contains(r#"data-name="storefront-threads""#));
    let post = http.post(format!("{url}rows")).send().await.unwrap();
    assert_eq!(post.status(), 405);
    // A page elsewhere that rebinds its own name to 127.0.0.1 sends its own Host.
    let rebound = http
        .get(&url)
        .header("host", "attacker.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let missing = http
        .get(format!("{url}report/shop/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 502);
    assert!(missing
        .text()
        .await
        .unwrap()
        .contains("No report of shop/nothing: no such experiment"));
    stop.cancel();
}
