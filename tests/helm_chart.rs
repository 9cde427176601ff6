//! The Helm chart, rendered by `helm template` with the value sets users pick: lint, RBAC
//! exactly as `src/rbac` declares it and never more (no wildcard, no Secrets, namespaced
//! installs without cluster-wide access), the security context of every pod, the uninstall
//! hook, notifications and Prometheus providers mounted as files, and wrong values refused at
//! install time naming the value. Read as YAML documents, not as text.
//!
//! Needs helm: `HELM` names it (scripts/test sets the local cluster's pinned build), so these
//! run with `--ignored`.

use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/concurrency-operator");
const FULLNAME: &str = "cop-concurrency-operator";

fn helm(args: &[&str]) -> Result<String, String> {
    let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".into());
    let out = Command::new(&helm)
        .args(args)
        .output()
        .map_err(|e| format!("{helm}: {e} (set HELM to a helm binary)"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{text}{err}"))
    }
}

/// One rendering: its text and its documents.
struct Rendered {
    name: String,
    text: String,
    docs: Vec<Value>,
}

fn template(name: &str, sets: &[&str]) -> Rendered {
    let mut args = vec!["template", "cop", CHART, "-n", "concurrency-system"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let text = helm(&args).unwrap_or_else(|e| panic!("{name}: helm template failed: {e}"));
    let docs = serde_yaml::Deserializer::from_str(&text)
        .map(Value::deserialize)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{name}: not YAML: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    Rendered {
        name: name.into(),
        text,
        docs,
    }
}

impl Rendered {
    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.docs.iter().filter(|d| d["kind"] == kind).collect()
    }

    fn named(&self, kind: &str, name: &str) -> Option<&Value> {
        self.of_kind(kind)
            .into_iter()
            .find(|d| d["metadata"]["name"] == name)
    }

    /// The pod templates of every Deployment and Job.
    fn pods(&self) -> Vec<&Value> {
        self.docs
            .iter()
            .filter(|d| d["kind"] == "Deployment" || d["kind"] == "Job")
            .map(|d| &d["spec"]["template"])
            .collect()
    }

    /// The values of environment variable `name` in every container.
    fn env(&self, name: &str) -> Vec<String> {
        self.pods()
            .into_iter()
            .flat_map(|p| seq(&p["spec"]["containers"]))
            .flat_map(|c| seq(&c["env"]))
            .filter(|e| e["name"] == name)
            .filter_map(|e| e["value"].as_str().map(String::from))
            .collect()
    }

    fn has(&self, needle: &str) -> bool {
        self.text.contains(needle)
    }

    fn labels_of(&self, kind: &str, name: &str) -> Value {
        let d = self
            .named(kind, name)
            .unwrap_or_else(|| panic!("{}: no {kind} {name}", self.name));
        d["metadata"]["labels"].clone()
    }

    fn annotation_count(&self, key: &str, value: &str) -> usize {
        self.docs
            .iter()
            .filter(|d| d["metadata"]["annotations"][key] == value)
            .count()
    }
}

fn seq(v: &Value) -> Vec<&Value> {
    v.as_sequence()
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

fn strs(v: &Value) -> Vec<&str> {
    seq(v).into_iter().filter_map(Value::as_str).collect()
}

#[test]
#[ignore = "needs helm (HELM)"]
fn the_chart_lints_strict() {
    helm(&["lint", "--strict", CHART]).unwrap();
    helm(&[
        "lint",
        "--strict",
        CHART,
        "--set",
        "replicaCount=2",
        "--set",
        "watchNamespaces={shop,staging}",
    ])
    .unwrap();
}

fn scoped() -> Rendered {
    template(
        "scoped",
        &[
            "watchNamespaces={shop,staging}",
            "replicaCount=2",
            "metrics.serviceMonitor.enabled=true",
            "dashboard.enabled=true",
        ],
    )
}

#[test]
#[ignore = "needs helm (HELM)"]
fn rbac_is_what_src_rbac_declares_and_namespaced_installs_get_no_cluster_access() {
    let default = template("default", &[]);
    let scoped = scoped();
    let nodrain = template("nodrain", &["uninstall.drainExperiments=false"]);
    assert!(
        default.named("ClusterRole", FULLNAME).is_some(),
        "an all-namespace install needs its ClusterRole"
    );
    // A namespaced install's only ClusterRoles are the users' (aggregated), never bound.
    assert!(scoped.of_kind("ClusterRoleBinding").is_empty());
    let names = |r: &Rendered, kind: &str| -> Vec<String> {
        r.of_kind(kind)
            .iter()
            .filter_map(|d| d["metadata"]["name"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(
        names(&scoped, "ClusterRole"),
        [format!("{FULLNAME}-view"), format!("{FULLNAME}-edit")]
    );
    // Per watched namespace the operator's and the drain hook's Role, plus the lease's.
    assert_eq!(
        scoped.of_kind("Role").len(),
        5,
        "{:?}",
        names(&scoped, "Role")
    );
    let view = default.labels_of("ClusterRole", &format!("{FULLNAME}-view"));
    assert_eq!(view["rbac.authorization.k8s.io/aggregate-to-view"], "true");
    let edit = default.labels_of("ClusterRole", &format!("{FULLNAME}-edit"));
    assert_eq!(edit["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
    let noedit = template("noedit", &["userRoles.aggregateToEdit=false"]);
    let edit = noedit.labels_of("ClusterRole", &format!("{FULLNAME}-edit"));
    assert!(edit["rbac.authorization.k8s.io/aggregate-to-edit"].is_null());
    let noroles = template("noroles", &["userRoles.enabled=false"]);
    assert_eq!(
        names(&noroles, "ClusterRole"),
        [FULLNAME.to_string(), format!("{FULLNAME}-drain")]
    );
    for r in [&default, &scoped, &nodrain, &noedit, &noroles] {
        for role in r
            .of_kind("Role")
            .into_iter()
            .chain(r.of_kind("ClusterRole"))
        {
            for rule in seq(&role["rules"]) {
                for field in ["apiGroups", "resources", "verbs"] {
                    assert!(
                        !strs(&rule[field]).contains(&"*"),
                        "{}: wildcard in {}: {rule:?}",
                        r.name,
                        role["metadata"]["name"].as_str().unwrap_or_default()
                    );
                }
                assert!(
                    !strs(&rule["resources"]).contains(&"secrets"),
                    "{}: access to Secrets: {rule:?}",
                    r.name
                );
            }
        }
    }
    // Every identity's rules are exactly src/rbac's: no verb more, none missing.
    for r in [&default, &scoped, &nodrain] {
        let diff = concurrency_operator::rbac::compare_chart(&r.text, FULLNAME).unwrap();
        assert!(
            diff.is_empty(),
            "{}: the chart's RBAC differs from src/rbac: {diff:#?}",
            r.name
        );
    }
}

#[test]
#[ignore = "needs helm (HELM)"]
fn every_pod_runs_as_non_root_on_a_read_only_root() {
    for r in [
        template("default", &[]),
        scoped(),
        template("nodrain", &["uninstall.drainExperiments=false"]),
    ] {
        let pods = r.pods();
        assert!(!pods.is_empty(), "{}: no pods", r.name);
        for pod in pods {
            assert_eq!(
                pod["spec"]["securityContext"]["runAsNonRoot"], true,
                "{}",
                r.name
            );
            for c in seq(&pod["spec"]["containers"]) {
                assert_eq!(
                    c["securityContext"]["readOnlyRootFilesystem"],
                    true,
                    "{}: {}",
                    r.name,
                    c["name"].as_str().unwrap_or_default()
                );
            }
        }
    }
}

#[test]
#[ignore = "needs helm (HELM)"]
fn candidate_overrides_policy_monitoring_and_dashboard_render_as_set() {
    let default = template("default", &[]);
    assert_eq!(
        default.env("CONCURRENCY_OPERATOR_ALLOW_CANDIDATE_OVERRIDES"),
        ["true"]
    );
    let off = template("nooverrides", &["policy.candidateOverrides=false"]);
    assert_eq!(
        off.env("CONCURRENCY_OPERATOR_ALLOW_CANDIDATE_OVERRIDES"),
        ["false"]
    );
    let scoped = scoped();
    assert_eq!(scoped.of_kind("ServiceMonitor").len(), 1);
    let dashboard = scoped
        .of_kind("ConfigMap")
        .into_iter()
        .find_map(|c| c["data"]["concurrency-operator.json"].as_str())
        .expect("the dashboard ConfigMap");
    let json: serde_json::Value = serde_json::from_str(dashboard).expect("the dashboard is JSON");
    assert!(json["schemaVersion"].is_number());
}

#[test]
#[ignore = "needs helm (HELM)"]
fn uninstall_drains_experiments_first_with_its_own_short_lived_identity() {
    let default = template("default", &[]);
    let drain = format!("{FULLNAME}-drain");
    let job = default.named("Job", &drain).expect("the drain Job");
    let annotations = &job["metadata"]["annotations"];
    assert_eq!(annotations["helm.sh/hook"], "pre-delete");
    assert_eq!(
        annotations["helm.sh/hook-delete-policy"],
        "before-hook-creation,hook-succeeded"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], drain.as_str());
    assert_eq!(strs(&pod["containers"][0]["args"]), ["drain"]);
    // Its ServiceAccount, ClusterRole and binding are hooks created before the Job.
    assert_eq!(default.annotation_count("helm.sh/hook-weight", "-1"), 3);
    for kind in ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"] {
        let d = default
            .named(kind, &drain)
            .unwrap_or_else(|| panic!("no drain {kind}"));
        assert_eq!(d["metadata"]["annotations"]["helm.sh/hook-weight"], "-1");
    }
    // Only the operator's pods carry its selector labels (the drain pod would join the
    // metrics Service).
    let selected: Vec<&Value> = default
        .pods()
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app.kubernetes.io/name"] == "concurrency-operator")
        .collect();
    assert_eq!(selected.len(), 1);
    let nodrain = template("nodrain", &["uninstall.drainExperiments=false"]);
    assert!(!nodrain.has("pre-delete"));
    assert!(nodrain.named("Job", &drain).is_none());
}

/// The operator's Deployment's volumes and mounts.
fn mounts(r: &Rendered) -> (Vec<&Value>, Vec<&Value>) {
    let d = r
        .named("Deployment", FULLNAME)
        .expect("the operator's Deployment");
    let pod = &d["spec"]["template"]["spec"];
    let mounts = seq(&pod["containers"])
        .into_iter()
        .flat_map(|c| seq(&c["volumeMounts"]))
        .collect();
    (seq(&pod["volumes"]), mounts)
}

#[test]
#[ignore = "needs helm (HELM)"]
fn notification_secrets_are_mounted_whole_and_named_to_the_operator() {
    let r = template(
        "notify",
        &[
            "notifications.secretName=cop-notify",
            "notifications.webhook.enabled=true",
            "notifications.slack.enabled=true",
            "notifications.events={RolledBack,Promoted}",
        ],
    );
    let (volumes, mounts) = mounts(&r);
    assert!(volumes
        .iter()
        .any(|v| v["secret"]["secretName"] == "cop-notify"));
    assert!(mounts
        .iter()
        .any(|m| m["mountPath"] == "/etc/concurrency-operator/notifications"));
    // A subPath mount would never see a rotated Secret.
    assert!(mounts.iter().all(|m| m["subPath"].is_null()));
    let dir = "/etc/concurrency-operator/notifications";
    assert_eq!(
        r.env("CONCURRENCY_OPERATOR_NOTIFY_WEBHOOK_URL_FILE"),
        [format!("{dir}/webhook-url")]
    );
    assert_eq!(
        r.env("CONCURRENCY_OPERATOR_NOTIFY_WEBHOOK_SIGNING_KEY_FILE"),
        [format!("{dir}/webhook-signing-key")]
    );
    assert_eq!(
        r.env("CONCURRENCY_OPERATOR_NOTIFY_SLACK_URL_FILE"),
        [format!("{dir}/slack-url")]
    );
    assert_eq!(
        r.env("CONCURRENCY_OPERATOR_NOTIFY_EVENTS"),
        ["RolledBack,Promoted"]
    );
    let default = template("default", &[]);
    assert!(!default.has("NOTIFY_") && !default.has("notifications"));
}

#[test]
#[ignore = "needs helm (HELM)"]
fn prometheus_providers_are_paths_in_a_configmap_and_secrets_mounted_whole() {
    let r = template(
        "prom",
        &[
            "prometheus.default.url=https://prom.monitoring:9090/prometheus",
            "prometheus.default.bearerTokenSecret.name=prom-default",
            "prometheus.default.caSecret.name=prom-ca",
            "prometheus.default.serverName=prom.internal",
            "prometheus.default.headers.X-Scope-OrgID=platform",
            "prometheus.credentials.team-a.basicAuthSecret.name=team-a-prom",
            "prometheus.credentials.team-a.url=https://mimir.example/prometheus",
            "prometheus.credentials.team-a.namespaces={team-a}",
            "prometheus.allowedUrls={https://prom.monitoring:9090/,https://mimir.example/}",
        ],
    );
    let cm = r
        .named("ConfigMap", &format!("{FULLNAME}-prometheus"))
        .expect("the Prometheus ConfigMap");
    let config = cm["data"]["prometheus.yaml"]
        .as_str()
        .expect("prometheus.yaml");
    // The operator must accept what the chart renders: src/prometheus/tests parses this file.
    let fixture = include_str!("../src/prometheus/tests/chart-rendered-prometheus.yaml");
    assert_eq!(
        config, fixture,
        "the rendered Prometheus config differs from src/prometheus/tests/chart-rendered-prometheus.yaml (update it)"
    );
    let secrets = "/etc/concurrency-operator/prometheus-secrets";
    for want in [
        "url: https://prom.monitoring:9090/prometheus".to_string(),
        format!("bearerTokenFile: {secrets}/prom-default/token"),
        format!("caFile: {secrets}/prom-ca/ca.crt"),
        "serverName: prom.internal".into(),
        "X-Scope-OrgID: platform".into(),
        format!("passwordFile: {secrets}/team-a-prom/password"),
        format!("usernameFile: {secrets}/team-a-prom/username"),
        "- team-a".into(),
        "- https://mimir.example/".into(),
    ] {
        assert!(
            config.contains(&want),
            "the Prometheus config lacks {want:?}:\n{config}"
        );
    }
    let (volumes, mounts) = mounts(&r);
    for secret in ["prom-ca", "prom-default", "team-a-prom"] {
        assert!(
            mounts
                .iter()
                .any(|m| m["mountPath"] == format!("{secrets}/{secret}").as_str()),
            "Secret {secret} not mounted"
        );
        assert!(volumes.iter().any(|v| v["secret"]["secretName"] == secret));
    }
    assert!(mounts.iter().all(|m| m["subPath"].is_null()));
    assert_eq!(
        r.env("CONCURRENCY_OPERATOR_PROMETHEUS_CONFIG"),
        ["/etc/concurrency-operator/prometheus/prometheus.yaml"]
    );
    // A change of the config rolls the pods.
    let d = r.named("Deployment", FULLNAME).unwrap();
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["checksum/prometheus-config"].is_string()
    );
    let default = template("default", &[]);
    for absent in [
        "PROMETHEUS_CONFIG",
        "prometheus-secrets",
        "checksum/prometheus",
    ] {
        assert!(
            !default.has(absent),
            "{absent} rendered while no provider is configured"
        );
    }
}

#[test]
#[ignore = "needs helm (HELM)"]
fn wrong_values_are_refused_at_install_naming_the_value() {
    let cases: [(&str, &[&str]); 18] = [
        ("replicaCount", &["replicaCount=0"]),
        (
            "leaderElection",
            &["replicaCount=2", "leaderElection.enabled=false"],
        ),
        ("watchNamespaces", &["watchNamespaces={Bad_Name}"]),
        ("logFormat", &["logFormat=xml"]),
        ("metrics", &["metrics.port=80"]),
        ("image", &["image.pullPolicy=Sometimes"]),
        ("replicaCout", &["replicaCout=2"]),
        ("uninstall", &["uninstall.timeout=soon"]),
        ("uninstall", &["uninstall.drainExperiments=maybe"]),
        (
            "notifications.secretName",
            &["notifications.webhook.enabled=true"],
        ),
        (
            "notifications",
            &[
                "notifications.secretName=n",
                "notifications.events={Rollback}",
            ],
        ),
        ("notifications", &["notifications.attempts=0"]),
        ("notifications", &["notifications.webhook.urlKey=a/b"]),
        ("prometheus", &["prometheus.default.url=ftp://prom"]),
        ("prometheus", &["prometheus.allowedUrls={prom.monitoring}"]),
        ("Team_A", &["prometheus.credentials.Team_A.url=http://prom"]),
        (
            "prometheus",
            &["prometheus.default.bearerTokenSecret.key=a/b"],
        ),
        (
            "prometheus",
            &["prometheus.default.tokenFile=/var/run/secrets/kubernetes.io/serviceaccount/token"],
        ),
    ];
    for (want, sets) in cases {
        let mut args = vec!["template", "cop", CHART];
        for s in sets {
            args.extend(["--set", s]);
        }
        match helm(&args) {
            Ok(_) => panic!("accepted {sets:?}"),
            Err(msg) => assert!(
                msg.contains(want),
                "the refusal of {sets:?} does not name {want}: {msg}"
            ),
        }
    }
}
