//! The operator's Kubernetes permissions, declared beside the code that needs them, so that
//! least privilege can be proven rather than claimed:
//!
//! - every request the mocked-API tests see the controller make must be granted here (the fake
//!   API server refuses any other, naming it), so nothing the code calls is missing;
//! - the chart must grant exactly these, no verb more or less: `compare_chart` (also
//!   `concurrency-operator rbac-check FILE`) compares a `helm template` output
//!   (tests/helm_chart.rs runs it for each value set).
//!
//! Three identities: the operator (its ClusterRole, or a Role per watched namespace), its
//! leader election (a Role in the release namespace), and the uninstall hook's `drain` (its
//! own ServiceAccount, which only deletes experiments).

use std::collections::BTreeSet;

use serde::Deserialize;

/// One RBAC rule, as written in a Role: an API group, a resource and its verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// Which code needs it, for the reader of a denied request or of the chart.
    pub why: &'static str,
}

const fn rule(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    why: &'static str,
) -> Rule {
    Rule {
        group,
        resource,
        verbs,
        why,
    }
}

/// The operator's rules in every namespace it watches.
pub const OPERATOR: &[Rule] = &[
    rule("concurrency.dev", "concurrencyexperiments", &["get", "list", "watch", "patch"],
        "the experiment watch (controller/experiments.rs); finalizer and one-shot annotation patches"),
    rule("concurrency.dev", "concurrencyexperiments/status", &["patch"],
        "status writes (controller/status.rs)"),
    rule("concurrency.dev", "concurrencyexperiments/finalizers", &["update"],
        "no call: the API server's OwnerReferencesPermissionEnforcement requires it to set \
         blockOwnerDeletion on the objects an experiment owns"),
    rule("", "namespaces", &["get"],
        "a deleted experiment in a terminating namespace lets go at once (controller/namespaces.rs)"),
    rule("apps", "deployments", &["get", "list", "watch", "create", "patch", "delete"],
        "the Deployment cache (controller/mod.rs; get: a target cached metadata-only, \
         controller/deployments.rs); server-side apply of candidates and variants \
         (create: an apply that creates); the target's replicas and template; removing variants"),
    rule("apps", "replicasets", &["list"],
        "the target's current pod-template hash (controller/fetch.rs)"),
    rule("autoscaling", "horizontalpodautoscalers", &["list", "watch"],
        "the HPA cache: the split works around the target's HPA, never writes it"),
    rule("", "pods", &["list"],
        "restarts and not-ready reasons of the candidate's pods (controller/pods.rs)"),
    rule("", "services", &["list", "create", "patch", "delete"],
        "finding the target's Service; applying and removing the variant Services"),
    rule("", "configmaps", &["get"],
        "the ConfigMaps the target's app container takes its server variables from"),
    rule("gateway.networking.k8s.io", "httproutes", &["get", "patch"],
        "gatewayAPI: reading and splitting the user's HTTPRoute (controller/act/route.rs)"),
    rule("discovery.k8s.io", "endpointslices", &["list"],
        "gatewayAPI: a variant Service joins the route once it has a ready endpoint"),
    rule("metrics.k8s.io", "pods", &["list"],
        "the candidate's pod usage for the target's HPA rule at 100 % (replicas router)"),
    rule("events.k8s.io", "events", &["create", "patch"],
        "Events on experiments (patch: a repeated Event's series)"),
];

/// Leader election, in the release namespace only (kube-lease-manager: get, create, patch).
pub const LEADER: &[Rule] = &[rule(
    "coordination.k8s.io",
    "leases",
    &["get", "create", "patch"],
    "the leader Lease (leader/mod.rs)",
)];

/// The uninstall hook (`concurrency-operator drain`): lists and deletes experiments, and waits
/// for them to go; the running operator does the restoring.
pub const DRAIN: &[Rule] = &[rule(
    "concurrency.dev",
    "concurrencyexperiments",
    &["list", "delete"],
    "drain/mod.rs",
)];

/// `(group, resource, verb)` for each verb of `rules`.
pub fn grants(rules: &[Rule]) -> BTreeSet<(String, String, String)> {
    rules
        .iter()
        .flat_map(|r| {
            r.verbs
                .iter()
                .map(|v| (r.group.to_string(), r.resource.to_string(), v.to_string()))
        })
        .collect()
}

/// The RBAC request one API call makes: `(group, resource, verb)` for `method` and a path with
/// its query, as the API server's authorizer sees it (a GET of a collection is `list`, with
/// `watch=true` a `watch`; PUT is `update`). `None` for a path that is not a resource.
pub fn request_of(method: &str, uri: &str) -> Option<(String, String, String)> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        // A namespace itself: `/api/v1/namespaces/NAME` is the resource `namespaces`.
        ["namespaces", name] => return Some(verb(method, group, "namespaces", Some(name), query)),
        ["namespaces", _ns, rest @ ..] => rest,
        rest => rest,
    };
    match rest {
        [resource] => Some(verb(method, group, resource, None, query)),
        [resource, name] => Some(verb(method, group, resource, Some(name), query)),
        [resource, name, sub] => Some(verb(
            method,
            group,
            &format!("{resource}/{sub}"),
            Some(name),
            query,
        )),
        _ => None,
    }
}

fn verb(
    method: &str,
    group: &str,
    resource: &str,
    name: Option<&str>,
    query: &str,
) -> (String, String, String) {
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let verb = match (method, name) {
        ("GET", _) if watch => "watch",
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", None) => "deletecollection",
        ("DELETE", Some(_)) => "delete",
        (other, _) => other,
    };
    (group.to_string(), resource.to_string(), verb.to_lowercase())
}

/// What `rendered` (a `helm template` output) grants the three identities of release `release`,
/// against what they are declared to need: one line per difference, empty when they agree.
/// The operator's rules are those of its ClusterRole or, namespaced, of each Role of that name.
pub fn compare_chart(rendered: &str, fullname: &str) -> Result<Vec<String>, String> {
    let mut operator: Vec<BTreeSet<(String, String, String)>> = Vec::new();
    let (mut leader, mut drain) = (None, None);
    for doc in serde_yaml::Deserializer::from_str(rendered) {
        let v = serde_yaml::Value::deserialize(doc).map_err(|e| format!("not YAML: {e}"))?;
        let kind = v["kind"].as_str().unwrap_or_default();
        if kind != "Role" && kind != "ClusterRole" {
            continue;
        }
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        let rules = rules_of(&v)?;
        if name == fullname {
            operator.push(rules);
        } else if name == format!("{fullname}-leader-election") {
            leader = Some(rules);
        } else if name == format!("{fullname}-drain") {
            drain = Some(rules);
        }
    }
    let mut out = Vec::new();
    if operator.is_empty() {
        out.push(format!(
            "no Role or ClusterRole named {fullname} for the operator"
        ));
    }
    for got in &operator {
        diff("operator", &grants(OPERATOR), got, &mut out);
    }
    if let Some(got) = &leader {
        diff("leader election", &grants(LEADER), got, &mut out);
    }
    if let Some(got) = &drain {
        diff("uninstall hook", &grants(DRAIN), got, &mut out);
    }
    Ok(out)
}

fn rules_of(role: &serde_yaml::Value) -> Result<BTreeSet<(String, String, String)>, String> {
    let mut out = BTreeSet::new();
    let Some(rules) = role["rules"].as_sequence() else {
        return Ok(out);
    };
    let strings = |v: &serde_yaml::Value| -> Vec<String> {
        v.as_sequence()
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for r in rules {
        for g in strings(&r["apiGroups"]) {
            for res in strings(&r["resources"]) {
                for verb in strings(&r["verbs"]) {
                    if g == "*" || res == "*" || verb == "*" {
                        return Err(format!(
                            "a wildcard in {g}/{res} {verb}: grant what is used"
                        ));
                    }
                    out.insert((g.clone(), res.clone(), verb));
                }
            }
        }
    }
    Ok(out)
}

fn diff(
    who: &str,
    want: &BTreeSet<(String, String, String)>,
    got: &BTreeSet<(String, String, String)>,
    out: &mut Vec<String>,
) {
    let name = |(g, r, v): &(String, String, String)| {
        let g = if g.is_empty() { "core" } else { g };
        format!("{v} {g}/{r}")
    };
    for extra in got.difference(want) {
        out.push(format!(
            "{who}: the chart grants {} that the code never uses",
            name(extra)
        ));
    }
    for missing in want.difference(got) {
        out.push(format!(
            "{who}: the code needs {} that the chart does not grant",
            name(missing)
        ));
    }
}

#[cfg(test)]
mod tests;
