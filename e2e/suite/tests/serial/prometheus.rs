//! A Prometheus as platform teams run it: behind TLS and basic auth, at a path prefix, reached
//! through a credentials set of the Helm chart whose Secrets the chart mounts (issue 28). The
//! Prometheus is a real one in the scenario's namespace, started with `--web.config.file`; it
//! reads the cluster's Prometheus through remote read, so it answers with the same series.

use e2e_tests::{
    alone, cluster_script, ensure, install_operator, latency_check, name_of, operator_ns,
    rolled_out, run, status, within, Exp, Phase, Progress, Scenario, Target, RATE,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

const USER: &str = "alice";
const PASSWORD: &str = "correct horse battery staple";
/// bcrypt of `PASSWORD` at cost 4 (as in tests/prometheus_providers.rs).
const PASSWORD_HASH: &str = "$2b$04$8EOKkLNFLB3MlBMOxV/9FOKzi3Eoj6qqAMu.IyvqHbVKMhizNVWIm";
const WRONG_PASSWORD: &str = "hunter2";
/// The Secrets a platform team creates in the operator's namespace (docs/operations.md).
const AUTH: &str = "e2e-prometheus-auth";
const WRONG: &str = "e2e-prometheus-wrong";
const CA: &str = "e2e-prometheus-ca";
const PREFIX: &str = "/prom";

#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn prometheus_credentials() {
    let _alone = alone().await;
    run("prometheus_credentials", async |s| {
        let outcome = secured(s).await;
        // The chart's defaults and no Secrets again, whatever happened.
        install_operator(&[]).await?;
        let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &operator_ns());
        for name in [AUTH, WRONG, CA] {
            let _ = secrets.delete(name, &DeleteParams::default()).await;
        }
        outcome
    })
    .await;
}

async fn secured(s: &Scenario) -> anyhow::Result<()> {
    let host = format!("prometheus-secure.{}.svc", s.ns);
    let url = format!("https://{host}:9443{PREFIX}");
    let ca = prometheus(s, &host).await?;
    operator_secrets(s, &ca).await?;
    let set = |name: &str, secret: &str| {
        [
            format!("prometheus.credentials.{name}.url={url}"),
            format!("prometheus.credentials.{name}.basicAuthSecret.name={secret}"),
            format!("prometheus.credentials.{name}.caSecret.name={CA}"),
            format!("prometheus.credentials.{name}.namespaces={{{}}}", s.ns),
        ]
    };
    let values: Vec<String> = set("secure", AUTH)
        .into_iter()
        .chain(set("wrong", WRONG))
        .flat_map(|v| ["--set".to_string(), v])
        .collect();
    install_operator(&values.iter().map(String::as_str).collect::<Vec<_>>()).await?;

    s.deploy_target(&Target::default()).await?;
    s.start_load(200, RATE).await?;
    let deploys: Api<Deployment> = Api::namespaced(s.client.clone(), &s.ns);
    within(120, "the secured Prometheus ready", async {
        await_condition(deploys.clone(), "prometheus-secure", rolled_out).await?;
        Ok(())
    })
    .await?;

    // Through the credentials set, no URL in the experiment: the pre-flight lookup and every
    // analysis go to the secured Prometheus with the mounted password and CA.
    let through = |name: &str, credentials: &str, threads: u32| {
        Exp::new(
            name,
            json!({"server": "puma", "workers": 2, "threads": threads}),
            latency_check(),
        )
        .stage_s(20)
        .extra(json!({"analysis": {"prometheus": {"url": "", "credentials": credentials}}}))
    };
    s.apply(&through("secured", "secure", 4)).await?;
    let e = s.progress("secured", Progress::default()).await?;
    let st = status(&e);
    s.log(format!(
        "secured: {} after {} analyses; latency values {:?}",
        st.phase.as_str(),
        st.analyses.len(),
        st.analyses
            .iter()
            .flat_map(|a| a.checks.iter().filter(|c| c.name == "latency"))
            .map(|c| (c.baseline, c.candidate))
            .collect::<Vec<_>>()
    ));
    ensure!(
        st.phase == Phase::Succeeded,
        "through the secured Prometheus the experiment ended {}: {:?}",
        st.phase.as_str(),
        st.decision.map(|d| d.message)
    );
    ensure!(
        st.preflight.as_ref().is_some_and(|p| p.passed_at.is_some()),
        "the pre-flight lookup did not pass: {:?}",
        st.preflight
    );
    // Every query answered: the baseline's latency in every analysis (the first may find the
    // candidate without requests yet, which is Inconclusive, not an error), and most passed
    // on both variants' values.
    let answered = |c: &e2e_tests::CheckResult| c.name != "latency" || c.baseline.is_some();
    ensure!(
        st.analyses.iter().all(|a| a.checks.iter().all(answered)),
        "an analysis without the baseline's latency through the secured Prometheus: {:?}",
        st.analyses
    );
    let passed = st
        .analyses
        .iter()
        .filter(|a| name_of(&a.verdict) == "Pass")
        .filter(|a| a.checks.iter().all(|c| c.candidate.is_some()))
        .count();
    ensure!(
        passed >= 3,
        "only {passed} analyses passed with values: {:?}",
        st.analyses
    );

    // A wrong password: refused before anything is created, said so, never shown.
    s.apply(&through("refused", "wrong", 6)).await?;
    let e = s
        .wait_cexp("refused", 60, "the refusal in the pre-flight", |e| {
            status(e)
                .preflight
                .and_then(|p| p.message)
                .is_some_and(|m| m.contains("401"))
        })
        .await?;
    let st = status(&e);
    let shown = serde_json::to_string(&st)?;
    ensure!(
        !shown.contains(WRONG_PASSWORD) && !shown.contains(PASSWORD),
        "a password in status: {shown}"
    );
    ensure!(
        st.phase == Phase::Pending,
        "refused credentials must hold the experiment before anything moves, not {}",
        st.phase.as_str()
    );
    let candidate = deploys.get_opt("storefront-candidate").await?;
    ensure!(
        candidate.is_none(),
        "a candidate was created with refused credentials"
    );
    s.log(format!(
        "refused: {:?}",
        st.preflight.and_then(|p| p.message)
    ));
    s.delete_cexp("refused", 60).await
}

/// The secured Prometheus in the scenario's namespace: TLS with a certificate for `host` from a
/// throwaway CA, basic auth, the API under `PREFIX`; returns the CA certificate.
async fn prometheus(s: &Scenario, host: &str) -> anyhow::Result<String> {
    let dir = std::env::temp_dir().join(format!("e2e-prometheus-{}", s.ns));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/test-certs");
    let made = tokio::process::Command::new(script)
        .arg(&dir)
        .arg(host)
        .status()
        .await?;
    ensure!(made.success(), "scripts/test-certs failed: {made}");
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    let (ca, cert, key) = (read("ca.crt")?, read("server.crt")?, read("server.key")?);
    let _ = std::fs::remove_dir_all(&dir);
    cluster_script("prometheus", &["image", "prometheus:e2e"]).await?;

    let web = format!(
        "tls_server_config: {{cert_file: /web/tls.crt, key_file: /web/tls.key}}\n\
         basic_auth_users: {{{USER}: \"{PASSWORD_HASH}\"}}\n"
    );
    let pp = PostParams::default();
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &s.ns);
    let secret = json!({"metadata": {"name": "prometheus-web"},
        "stringData": {"web.yml": web, "tls.crt": cert, "tls.key": key}});
    secrets
        .create(&pp, &serde_json::from_value(secret)?)
        .await?;
    // No scraping of its own: every query reads the cluster's Prometheus, recent data included.
    let config = "global: {evaluation_interval: 1m}\nremote_read:\n  - url: \
                  http://prometheus.monitoring:9090/api/v1/read\n    read_recent: true\n";
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let map = json!({"metadata": {"name": "prometheus-secure"},
        "data": {"prometheus.yml": config}});
    maps.create(&pp, &serde_json::from_value(map)?).await?;
    let labels = json!({"app": "prometheus-secure"});
    let deploy = json!({
        "metadata": {"name": "prometheus-secure"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "prometheus",
                        "image": "prometheus:e2e",
                        "imagePullPolicy": "Never",
                        "args": [
                            "--config.file=/config/prometheus.yml",
                            "--storage.tsdb.path=/tmp/data",
                            "--web.config.file=/web/web.yml",
                            "--web.listen-address=:9443",
                            format!("--web.route-prefix={PREFIX}"),
                            format!("--web.external-url=https://{host}:9443{PREFIX}"),
                        ],
                        "ports": [{"containerPort": 9443}],
                        // Not before it listens: a TCP check (its HTTP wants the password).
                        "readinessProbe": {"tcpSocket": {"port": 9443}, "periodSeconds": 2},
                        "volumeMounts": [
                            {"name": "web", "mountPath": "/web"},
                            {"name": "config", "mountPath": "/config"},
                        ],
                    }],
                    "volumes": [
                        {"name": "web", "secret": {"secretName": "prometheus-web"}},
                        {"name": "config", "configMap": {"name": "prometheus-secure"}},
                    ],
                },
            },
        },
    });
    let deploys: Api<Deployment> = Api::namespaced(s.client.clone(), &s.ns);
    deploys
        .create(&pp, &serde_json::from_value(deploy)?)
        .await?;
    let services: Api<Service> = Api::namespaced(s.client.clone(), &s.ns);
    let service = json!({"metadata": {"name": "prometheus-secure"},
        "spec": {"selector": labels, "ports": [{"port": 9443, "targetPort": 9443}]}});
    services
        .create(&pp, &serde_json::from_value(service)?)
        .await?;
    Ok(ca)
}

/// The Secrets the chart mounts for the two credentials sets: the right password, a wrong one,
/// and the CA.
async fn operator_secrets(s: &Scenario, ca: &str) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &operator_ns());
    let pp = PostParams::default();
    for (name, data) in [
        (AUTH, json!({"username": USER, "password": PASSWORD})),
        (WRONG, json!({"username": USER, "password": WRONG_PASSWORD})),
        (CA, json!({"ca.crt": ca})),
    ] {
        let _ = secrets.delete(name, &DeleteParams::default()).await;
        let secret = json!({"metadata": {"name": name}, "stringData": data});
        secrets
            .create(&pp, &serde_json::from_value(secret)?)
            .await?;
    }
    Ok(())
}
