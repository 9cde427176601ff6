//! The Gateway API data plane of the scenarios that route through it: Traefik
//! (`e2e/platform gateway`: a host process on the bridge IP with its kubernetesGateway
//! provider, which also installs the Gateway API CRDs it is built against) serves Gateway
//! `shop-gateway` of class e2e-traefik, and HTTPRoute `storefront` sends its traffic to the
//! user's Service `storefront`. Local cluster only.

use std::collections::HashMap;
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{cluster_script, ensure, eventually, platform, wait_for, Result, Scenario};

/// The gateway of one scenario: its HTTPRoute API and the load's in-cluster URL.
pub struct Routed {
    pub routes: Api<DynamicObject>,
    /// `http://<gateway Service IP>`: where the load pod sends every request.
    pub url: String,
}

impl Scenario {
    /// A Gateway API object kind in the scenario's namespace.
    pub fn gateway_api(&self, kind: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind);
        Api::namespaced_with(self.client.clone(), &self.ns, &ApiResource::from_gvk(&gvk))
    }

    /// Starts the data plane (idempotent), creates Gateway `shop-gateway` and HTTPRoute
    /// `storefront` → Service `storefront`, and returns once Traefik accepted the route and
    /// routes to the target (which must be deployed).
    pub async fn route_through_gateway(&self) -> Result<Routed> {
        cluster_script("gateway", &["start"]).await?;
        self.remove_other_gateways().await?;
        let env = gateway_env().await?;
        let var = |k: &str| {
            env.get(k)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("gateway env has no {k}"))
        };
        let port: i64 = var("GATEWAY_PORT")?.parse()?;
        let gw: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "shop-gateway"},
            "spec": {"gatewayClassName": "e2e-traefik", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": port,
                 "allowedRoutes": {"namespaces": {"from": "Same"}}}
            ]},
        }))?;
        self.gateway_api("Gateway")
            .create(&PostParams::default(), &gw)
            .await?;
        let route: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "storefront"},
            "spec": {"parentRefs": [{"name": "shop-gateway"}],
                     "rules": [{"backendRefs": [{"name": "storefront", "port": 80}]}]},
        }))?;
        let routes = self.gateway_api("HTTPRoute");
        routes.create(&PostParams::default(), &route).await?;
        wait_for(
            routes.clone(),
            "storefront",
            60,
            "HTTPRoute accepted by the gateway",
            accepted,
        )
        .await?;
        let host_url = var("GATEWAY_HOST_URL")?;
        eventually(30, "the gateway routes to the target", async || {
            healthy(&host_url).await
        })
        .await?;
        Ok(Routed {
            routes,
            url: var("GATEWAY_URL")?,
        })
    }
}

impl Scenario {
    /// Earlier scenarios' Gateways (their namespaces stay until the suite runs them again):
    /// every scenario's Gateway listens on the same port and its HTTPRoute matches every path,
    /// so Traefik would send this scenario's load to whichever route it took first — measured
    /// once: all 40 req/s went to the `gateway` scenario's pods. One scenario routes through
    /// the gateway at a time (the serial `gateway`, or one in the parallel batch).
    async fn remove_other_gateways(&self) -> Result {
        let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway");
        let all: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk));
        for gw in all.list(&ListParams::default()).await?.items {
            let ns = gw.metadata.namespace.clone().unwrap_or_default();
            let class = gw.data["spec"]["gatewayClassName"].as_str().unwrap_or("");
            if ns == self.ns || !ns.starts_with("e2e-") || class != "e2e-traefik" {
                continue;
            }
            let name = gw.metadata.name.clone().unwrap_or_default();
            self.log(format!(
                "removing Gateway {ns}/{name}, left by an earlier scenario"
            ));
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &ns, &ApiResource::from_gvk(&gvk));
            api.delete(&name, &DeleteParams::default()).await?;
        }
        Ok(())
    }
}

/// `e2e/platform gateway env`: GATEWAY_PORT, GATEWAY_URL (in-cluster), GATEWAY_HOST_URL.
async fn gateway_env() -> Result<HashMap<String, String>> {
    let path = platform();
    let out = tokio::process::Command::new(&path)
        .args(["gateway", "env"])
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "{path} gateway env: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// Whether GET `url`/healthz answers 200 (plain HTTP/1.0 to the gateway's host address).
async fn healthy(url: &str) -> Result<bool> {
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
pub fn route_weights(route: &DynamicObject) -> Vec<(String, i64)> {
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
