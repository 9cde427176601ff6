use super::*;

fn g(group: &str, resource: &str, verb: &str) -> Option<(String, String, String)> {
    Some((group.into(), resource.into(), verb.into()))
}

#[test]
fn a_request_is_the_rbac_verb_the_api_server_checks() {
    let cases = [
        (
            "GET",
            "/apis/apps/v1/namespaces/shop/deployments/web",
            g("apps", "deployments", "get"),
        ),
        (
            "GET",
            "/apis/apps/v1/deployments?watch=true&resourceVersion=1",
            g("apps", "deployments", "watch"),
        ),
        (
            "GET",
            "/api/v1/namespaces/shop/pods?labelSelector=a%3Db",
            g("", "pods", "list"),
        ),
        ("GET", "/api/v1/namespaces/shop", g("", "namespaces", "get")),
        (
            "PATCH",
            "/apis/concurrency.dev/v1alpha1/namespaces/shop/concurrencyexperiments/x/status",
            g("concurrency.dev", "concurrencyexperiments/status", "patch"),
        ),
        (
            "POST",
            "/apis/events.k8s.io/v1/namespaces/shop/events",
            g("events.k8s.io", "events", "create"),
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/shop/deployments/web",
            g("apps", "deployments", "update"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/shop/services/web-candidate",
            g("", "services", "delete"),
        ),
        ("GET", "/version", None),
    ];
    for (method, uri, want) in cases {
        assert_eq!(request_of(method, uri), want, "{method} {uri}");
    }
}

const ROLE: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cop}
rules:
  - apiGroups: ["concurrency.dev"]
    resources: ["concurrencyexperiments"]
    verbs: ["get", "list", "watch", "patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cop-drain, namespace: ops}
rules:
  - apiGroups: ["concurrency.dev"]
    resources: ["concurrencyexperiments"]
    verbs: ["list", "delete"]
---
kind: ConfigMap
metadata: {name: cop}
"#;

#[test]
fn the_chart_comparison_names_every_extra_and_missing_verb() {
    let out = compare_chart(ROLE, "cop").unwrap();
    assert!(
        out.contains(&"operator: the chart grants update concurrency.dev/concurrencyexperiments that the code never uses".to_string()),
        "{out:#?}"
    );
    assert!(
        out.contains(
            &"operator: the code needs patch apps/deployments that the chart does not grant"
                .to_string()
        ),
        "{out:#?}"
    );
    assert!(
        !out.iter().any(|l| l.starts_with("uninstall hook")),
        "{out:#?}"
    );
    assert!(
        compare_chart(ROLE, "other").unwrap()[0].starts_with("no Role or ClusterRole named other")
    );
}

#[test]
fn a_wildcard_is_refused() {
    let star = "kind: Role\nmetadata: {name: cop}\nrules: [{apiGroups: ['*'], resources: [pods], verbs: [get]}]\n";
    assert!(compare_chart(star, "cop").unwrap_err().contains("wildcard"));
}

#[test]
fn no_identity_is_granted_the_same_verb_twice_and_every_rule_says_why() {
    for rules in [OPERATOR, LEADER, DRAIN] {
        let verbs: usize = rules.iter().map(|r| r.verbs.len()).sum();
        assert_eq!(grants(rules).len(), verbs);
        assert!(rules.iter().all(|r| !r.why.is_empty()));
    }
}
