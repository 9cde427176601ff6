//! The gatewayAPI router through a real data plane: Traefik (e2e/cluster/gateway: a host
//! process on the bridge IP with its kubernetesGateway provider, which also installs the
//! Gateway API CRDs it is built against) serves Gateway `shop-gateway` of class e2e-traefik,
//! and the load pod sends every request through it (Service gateway.gateway-system), never the
//! user's Service. At every stage the HTTPRoute's backendRef weights must equal the planned
//! weight, and the split the pods observe (their own request counters) over a window that lies
//! wholly inside the stage must be within E2E_SPLIT_TOLERANCE (15) points of the candidate's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e_tests::{
    alone, cluster_script, ensure, eventually, latency_check, phase_of, run, split_within, status,
    wait_for, Exp, Phase, Scenario, Target, RATE,
};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STAGE_S: u64 = 25;

fn gateway_api(s: &Scenario, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind);
    Api::namespaced_with(s.client.clone(), &s.ns, &ApiResource::from_gvk(&gvk))
}

/// `e2e/cluster/gateway env`: GATEWAY_PORT, GATEWAY_URL (in-cluster), GATEWAY_HOST_URL.
async fn gateway_env() -> anyhow::Result<std::collections::HashMap<String, String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../cluster/gateway");
    let out = tokio::process::Command::new(path)
        .arg("env")
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "{path} env: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// Whether GET `url`/healthz answers 200 (plain HTTP/1.0 to the gateway's host address).
async fn healthy(url: &str) -> anyhow::Result<bool> {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let get = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        conn.write_all(b"GET /healthz HTTP/1.0\r\nHost: e2e\r\n\r\n")
            .await?;
        let mut head = [0u8; 12];
        conn.read_exact(&mut head).await?;
        anyhow::Ok(head.ends_with(b" 200"))
    };
    Ok(tokio::time::timeout(Duration::from_secs(2), get)
        .await
        .is_ok_and(|r| r.unwrap_or(false)))
}

/// `(service, weight)` of the HTTPRoute's first rule.
fn route_weights(route: &DynamicObject) -> Vec<(String, i64)> {
    let refs = route.data["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    refs.iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("").to_string(),
                r["weight"].as_i64().unwrap_or(1),
            )
        })
        .collect()
}

/// Traefik reports the HTTPRoute Accepted and its backendRefs resolved.
fn accepted(route: &DynamicObject) -> bool {
    let ok = |p: &Value, t: &str| {
        p["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    route.data["status"]["parents"]
        .as_array()
        .is_some_and(|ps| {
            ps.iter().any(|p| {
                p["controllerName"] == "traefik.io/gateway-controller"
                    && ok(p, "Accepted")
                    && ok(p, "ResolvedRefs")
            })
        })
}

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn gateway() {
    let _alone = alone().await;
    run("gateway", async |s| {
        let tol: i64 = std::env::var("E2E_SPLIT_TOLERANCE").ok().and_then(|t| t.parse().ok()).unwrap_or(15);
        // The window ends before the stage does (stage length minus settling and polling slack).
        let win = (STAGE_S - 12).min(15);
        cluster_script("gateway", &["start"]).await?;
        let env = gateway_env().await?;
        let var = |k: &str| env.get(k).cloned().ok_or_else(|| anyhow::anyhow!("gateway env has no {k}"));
        let port: i64 = var("GATEWAY_PORT")?.parse()?;
        s.deploy_target(&Target::default()).await?;
        let gw: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "shop-gateway"},
            "spec": {"gatewayClassName": "e2e-traefik", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": port, "allowedRoutes": {"namespaces": {"from": "Same"}}}
            ]},
        }))?;
        gateway_api(s, "Gateway").create(&PostParams::default(), &gw).await?;
        let route: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "storefront"},
            "spec": {"parentRefs": [{"name": "shop-gateway"}],
                     "rules": [{"backendRefs": [{"name": "storefront", "port": 80}]}]},
        }))?;
        let routes = gateway_api(s, "HTTPRoute");
        routes.create(&PostParams::default(), &route).await?;
        wait_for(routes.clone(), "storefront", 60, "HTTPRoute accepted by the gateway", accepted).await?;
        let host_url = var("GATEWAY_HOST_URL")?;
        eventually(30, "the gateway routes to the target", async || healthy(&host_url).await).await?;
        s.start_load_to(240, RATE, &var("GATEWAY_URL")?, "/").await?;
        let exp = Exp::new("routed", json!({"server": "puma", "workers": 2, "threads": 4}), latency_check())
            .extra(json!({"traffic": {"router": "gatewayAPI", "httpRoute": "storefront"}}));
        s.apply(&exp).await?;

        // Time-based: each weight is measured a window after it came into force, so this reads
        // the experiment and the route every second rather than waiting for a change.
        let (mut seen, mut measured) = (BTreeSet::new(), BTreeSet::new());
        let mut current: Option<(i32, Instant)> = None;
        let deadline = Instant::now() + Duration::from_secs(300);
        let e = loop {
            ensure!(Instant::now() < deadline, "gateway experiment: no final phase within 300 s");
            let e = s.cexp("routed").await?;
            if phase_of(&e).is_some_and(|p| p.is_terminal()) {
                break e;
            }
            let planned = status(&e).planned_weight;
            let weights = route_weights(&routes.get("storefront").await?);
            let in_force = |w: i32| weights.iter().any(|(n, x)| n == "storefront-candidate" && *x == w as i64);
            if phase_of(&e) == Some(Phase::Progressing) && !seen.contains(&planned) && in_force(planned) {
                s.log(format!("stage weight {planned}: route {weights:?}"));
                seen.insert(planned);
                current = Some((planned, Instant::now()));
            }
            // 5 s after the route changed (Traefik reloads, Prometheus scrapes), one window
            // later, and only while the weight is still in force.
            if let Some((w, since)) = current {
                if !measured.contains(&w) && in_force(w) && since.elapsed().as_secs() >= win + 5 {
                    let split = s.prom.observed_split(&s.ns, win).await?;
                    let shown = split.map(|p| format!("{p}%")).unwrap_or_else(|| "-".into());
                    s.log(format!(
                        "stage weight {w}: observed split through the gateway {shown} candidate (last {win} s)"
                    ));
                    split_within(split, w as i64, tol, "the route's weight")?;
                    measured.insert(w);
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        ensure!(phase_of(&e) == Some(Phase::Succeeded), "gateway experiment ended {}", e2e_tests::summary(Some(&e)));
        for w in [30, 70, 100] {
            ensure!(seen.contains(&w), "never saw the route at candidate weight {w} (saw {seen:?})");
            ensure!(measured.contains(&w), "never measured the split at candidate weight {w} (measured {measured:?})");
        }
        let weights = route_weights(&routes.get("storefront").await?);
        ensure!(
            weights.first().is_some_and(|(n, _)| n == "storefront")
                && !weights.iter().any(|(n, _)| n.contains("candidate")),
            "route not restored to the user's Service: {weights:?}"
        );
        let threads = s.env("storefront", "RAILS_MAX_THREADS").await?;
        ensure!(threads == "4", "target runs {threads} threads, not the candidate's 4");
        let svcs: Api<Service> = Api::namespaced(s.client.clone(), &s.ns);
        eventually(60, "variant Services gone", async || {
            Ok(svcs.list(&ListParams::default()).await?.items.len() == 1)
        })
        .await?;
        s.no_rbac_denials().await
    })
    .await;
}
