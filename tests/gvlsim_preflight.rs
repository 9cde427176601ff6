//! The pre-flight series lookup against a real Prometheus scraping a real `gvl-sim`: before
//! any request its boot-time series are there and nothing is refused (the request counter
//! comes with the first request: not checked); once it serves, every check's series are found; a misspelt
//! metric name is refused, naming it. The target's request rate that `reach` warns on is not
//! measured from seconds of data.
//!
//! Needs the `gvl-sim` binary: `cargo build -p gvl-sim` (found next to this test's target
//! directory) or `GVL_SIM_BIN`.

#[allow(dead_code)]
#[path = "prometheus_analysis/gvlsim.rs"]
mod gvlsim;
#[allow(dead_code)]
#[path = "prometheus_analysis/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use concurrency_operator::analysis::preflight::{target_rate, Target, Windows};
use concurrency_operator::analysis::{preflight, Preflight};
use concurrency_operator::api::ConcurrencyExperimentSpec;
use concurrency_operator::prometheus::PrometheusClient;
use harness::{start_prometheus, wait_for_data};
use jiff::Timestamp;

const NAMESPACE: &str = "shop";

fn spec(url: &str, extra_metrics: &str, extra_check: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        r#"
targetRef: {{name: storefront}}
container: web
candidate: {{server: puma, workers: 1, threads: 4}}
analysis:
  prometheus: {{url: "{url}"}}
  interval: 6s
  minRequests: 50
  metrics: {{memory: process_resident_memory_bytes{extra_metrics}}}
  checks:
    - {{metric: latency, quantile: 0.9, maxIncrease: "50%"}}
    - {{metric: errorRate, max: "1%"}}
    - {{metric: gvlWait, max: "20%"}}
    - {{metric: memory, maxIncrease: "100%"}}
    - {{metric: backlog, max: 5}}
    - {{metric: headroom, min: "10%"}}
{extra_check}"#
    ))
    .unwrap()
}

fn target() -> Target {
    Target {
        namespace: NAMESPACE.into(),
        deployment: "storefront".into(),
        container: "web".into(),
        // The test's Prometheus scrapes every second: 3 s of `up` is a settled target.
        windows: Windows {
            lookback: Duration::from_secs(3600),
            settle: Duration::from_secs(3),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lookup_finds_gvl_sims_series_and_refuses_a_misspelt_one() {
    let started = Instant::now();
    let (_server, addr) = gvlsim::try_start_server(&[
        ("SERVER", "puma".into()),
        ("WEB_CONCURRENCY", "1".into()),
        ("RAILS_MAX_THREADS", "4".into()),
        ("CPU_MS", "2".into()),
        ("IO_MS", "3".into()),
    ])
    .unwrap_or_else(|line| panic!("gvl-sim did not start: {line:?}"));
    let mut prom = start_prometheus(NAMESPACE, &[("storefront-7d9c5b6f4b-x2k9q", addr)]);
    let client = PrometheusClient::new(&prom.url, Duration::from_secs(5)).unwrap();
    wait_for_data(&mut prom, &client, 1, 4).await;
    let url = prom.url.clone();
    let plain = spec(&url, "", "").analysis;

    // No request yet: the histogram and the GVL counters exist from boot, the request counter
    // does not — noted as not checked, not refused.
    let idle = preflight(&client, &plain, &target(), Timestamp::now()).await;
    let Preflight::Unchecked(why) = idle else {
        panic!("an idle gvl-sim must not be refused: {idle:?}");
    };
    assert!(why.contains("served no request"), "{why}");

    let _load = gvlsim::start_load(addr, 20, 20, 4);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = preflight(&client, &plain, &target(), Timestamp::now()).await;
        if o == Preflight::Passed {
            break;
        }
        assert!(Instant::now() < deadline, "never found: {o:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The rate `reach` holds the stages against: none yet for a counter born seconds ago —
    // over 5m, rate() would read a fraction of the load's 20 req/s and warn wrongly.
    let rate = target_rate(&client, &plain, &target(), Timestamp::now()).await;
    assert_eq!(rate, None, "a rate from seconds of data");

    // A misspelt histogram name, and a custom query reading a metric nobody writes.
    let misspelt = spec(
        &url,
        ", requestDuration: rails_request_duraton_seconds",
        r#"    - {name: pool, query: 'max(puma_pool_capacityy{pod=~"{{pods}}"})', min: 1}"#,
    );
    let o = preflight(&client, &misspelt.analysis, &target(), Timestamp::now()).await;
    let Preflight::Missing(m) = o else {
        panic!("misspelt names must be refused: {o:?}");
    };
    // gvl-sim has the GVL counters: gvlWait misses only the histogram, as latency does.
    for part in [
        "checks latency, gvlWait: rails_request_duraton_seconds_bucket",
        "check pool: puma_pool_capacityy",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    assert!(
        !m.contains("check errorRate") && !m.contains("check memory"),
        "{m}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}
