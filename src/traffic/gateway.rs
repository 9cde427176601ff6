//! `gatewayAPI` router: HTTPRoute backendRef weights (`gateway.networking.k8s.io/v1`).
//!
//! k8s-openapi has no Gateway API types, so routes are `serde_json::Value`. HTTPRoute is a
//! custom resource: only JSON merge patch (or apply) works on it, and a merge patch replaces
//! arrays whole — so every patch here carries all rules, and the route's `resourceVersion`
//! when known, making the write fail with a conflict instead of undoing a concurrent edit.

use serde_json::{json, Map, Value};

use super::split::{percent, Live, ReplicaSplit};
use crate::workload::WorkloadError;

pub const HTTPROUTE_API_VERSION: &str = "gateway.networking.k8s.io/v1";

/// The route weight is exact, so the baseline keeps all its pods and the candidate gets
/// enough for its share (at least one).
pub(super) fn split(original: i32, weight: i32) -> ReplicaSplit {
    let candidate = ((original as i64 * weight as i64 + 99) / 100).max(1) as i32;
    ReplicaSplit {
        baseline: original,
        candidate,
        planned_effective_weight: weight,
    }
}

/// The route carries the stage's weight.
pub(super) fn traffic_back(live: &Live) -> bool {
    live.effective_weight == live.weight
}

/// Shift the route once the candidate's pods are ready, until it carries the stage's weight.
/// Pods that lost readiness after the split was in force give their share back at once: the
/// route keeps the candidate's ready pods at the stage's share per pod (1 of 3 ready at 100%:
/// 33%), the baseline, which keeps all its pods, takes the rest.
pub(super) fn weight_to_apply(split: &ReplicaSplit, live: &Live) -> Option<i32> {
    let needed = split.candidate.max(1);
    if live.candidate_ready >= needed {
        return (live.effective_weight != live.weight).then_some(live.weight);
    }
    if !live.started {
        return None;
    }
    let carried = live.weight as i64 * live.candidate_ready.max(0) as i64 / needed as i64;
    let carried = carried as i32;
    (live.effective_weight > carried).then_some(carried)
}

pub(super) fn in_force(live: &Live, candidate_done: bool) -> bool {
    candidate_done && live.effective_weight == live.weight
}

/// The route still sends the candidate a share: its original backendRefs are not back.
pub(super) fn needs_restore(effective_weight: i32) -> bool {
    effective_weight != 0
}

/// The backendRefs of every rule, in rule order (`null` for a rule without any), as saved in
/// `status.original.routeBackendRefs` before the first weighted patch.
pub fn route_backend_refs(route: &Value) -> Result<Value, WorkloadError> {
    Ok(Value::Array(
        rules(route)?
            .iter()
            .map(|rule| rule.get("backendRefs").cloned().unwrap_or(Value::Null))
            .collect(),
    ))
}

/// Merge patch sending each rule's traffic for `service` to `backends` (Service name and
/// percent, together 100): a stage's baseline and candidate, or a selection's baseline, fresh
/// baseline and candidates. They take the place of the original ref (port, filters and all);
/// refs to `ours` — every Service the experiment made, so a split by another set of variants
/// (the selection's, before stage 1) is replaced, not added to — are dropped; refs to other
/// backends keep their share of the rule, so their weights are scaled by 100 on the first
/// split. Applying it again to an already split route only moves the weights. Rules that do
/// not send traffic to `service` (or ours) are left as they are.
pub fn split_route_patch(
    route: &Value,
    service: &str,
    ours: &[&str],
    backends: &[(&str, i32)],
) -> Result<Value, WorkloadError> {
    let namespace = route.pointer("/metadata/namespace").and_then(Value::as_str);
    let mut referenced = false;
    let new_rules: Vec<Value> = rules(route)?
        .iter()
        .map(|rule| {
            let Some(refs) = rule.get("backendRefs").and_then(Value::as_array) else {
                return rule.clone();
            };
            let is = |b: &Value, name: &str| refers_to(b, name, namespace);
            let split =
                |b: &Value| ours.iter().any(|n| is(b, n)) || backends.iter().any(|(n, _)| is(b, n));
            let mine = |b: &Value| is(b, service) || split(b);
            let Some(first) = refs.iter().position(mine) else {
                return rule.clone();
            };
            referenced = true;
            let already_split = refs.iter().any(split);
            // The weight the target's Service had in this rule before any split.
            let share = if already_split {
                refs.iter().filter(|b| split(b)).map(weight).sum::<i64>() / 100
            } else {
                refs.iter().filter(|b| mine(b)).map(weight).sum::<i64>()
            };
            let variant = |name: &str, percent: i32| {
                let mut backend = refs[first].clone();
                backend["name"] = json!(name);
                backend["weight"] = json!(share * i64::from(percent.clamp(0, 100)));
                backend
            };
            let mut new_refs = Vec::with_capacity(refs.len() + backends.len());
            for (i, backend) in refs.iter().enumerate() {
                if i == first {
                    new_refs.extend(backends.iter().map(|(n, w)| variant(n, *w)));
                } else if !mine(backend) {
                    let mut other = backend.clone();
                    if !already_split {
                        other["weight"] = json!(weight(backend) * 100);
                    }
                    new_refs.push(other);
                }
            }
            let mut rule = rule.clone();
            rule["backendRefs"] = Value::Array(new_refs);
            rule
        })
        .collect();
    if !referenced {
        return Err(WorkloadError::ServiceNotInRoute {
            route: route_name(route),
            service: service.to_string(),
        });
    }
    Ok(rules_patch(route, new_rules))
}

/// Merge patch putting back, in every rule that sends traffic to one of `ours` (the Services
/// the experiment made), the backendRefs saved by [`route_backend_refs`], keeping the rest of
/// each rule as it is now. Rules without any of ours — the user's own, or added since — are
/// left as they are. When someone added or removed rules mid-flight the saved refs no longer
/// line up with the rules: such a rule is restored by undoing the split instead — ours go,
/// `service` takes their place with the share they had together (the first one's port and
/// filters), and the other backends' weights, scaled by 100 at the split, are scaled back — so
/// a rollback or deletion never waits for a person.
pub fn restore_route_patch(
    route: &Value,
    original_refs_json: &str,
    service: &str,
    ours: &[&str],
) -> Result<Value, WorkloadError> {
    let stored: Vec<Value> = serde_json::from_str(original_refs_json)
        .map_err(|e| WorkloadError::StoredRouteRefs(e.to_string()))?;
    let namespace = route.pointer("/metadata/namespace").and_then(Value::as_str);
    let current = rules(route)?;
    let aligned = stored.len() == current.len();
    let new_rules = current
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let Some(refs) = rule.get("backendRefs").and_then(Value::as_array) else {
                return rule.clone();
            };
            let split = |b: &Value| ours.iter().any(|n| refers_to(b, n, namespace));
            let Some(first) = refs.iter().position(split) else {
                return rule.clone();
            };
            let mut rule = rule.clone();
            let saved = stored.get(i).filter(|_| aligned).and_then(Value::as_array);
            if let Some(saved) =
                saved.filter(|s| s.iter().any(|b| refers_to(b, service, namespace)))
            {
                rule["backendRefs"] = Value::Array(saved.clone());
                return rule;
            }
            let share = refs.iter().filter(|b| split(b)).map(weight).sum::<i64>() / 100;
            let mut new_refs = Vec::with_capacity(refs.len());
            for (i, backend) in refs.iter().enumerate() {
                if i == first {
                    let mut user = backend.clone();
                    user["name"] = json!(service);
                    user["weight"] = json!(share);
                    new_refs.push(user);
                } else if !split(backend) {
                    let mut other = backend.clone();
                    other["weight"] = json!(weight(backend) / 100);
                    new_refs.push(other);
                }
            }
            rule["backendRefs"] = Value::Array(new_refs);
            rule
        })
        .collect();
    Ok(rules_patch(route, new_rules))
}

/// The candidate's percent of the traffic split between the two variant Services, as the
/// route stands. When rules disagree (a hand edit), the highest share — the candidate's real
/// exposure. `None` when no rule is split.
pub fn route_weight(route: &Value, baseline_svc: &str, candidate_svc: &str) -> Option<i32> {
    let namespace = route.pointer("/metadata/namespace").and_then(Value::as_str);
    route
        .pointer("/spec/rules")?
        .as_array()?
        .iter()
        .filter_map(|rule| {
            let refs = rule.get("backendRefs")?.as_array()?;
            let sum = |name: &str| -> Option<i64> {
                let mut found = refs
                    .iter()
                    .filter(|b| refers_to(b, name, namespace))
                    .peekable();
                found.peek()?;
                Some(found.map(weight).sum())
            };
            let (baseline, candidate) = (sum(baseline_svc).unwrap_or(0), sum(candidate_svc)?);
            let to_i32 = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
            Some(percent(to_i32(candidate), to_i32(baseline + candidate)))
        })
        .max()
}

/// Each of `services`' percent of the traffic split between them (a selection's baseline,
/// fresh baseline and candidates), as the route stands: 0 for one it does not send traffic
/// to. When rules disagree, the highest share, as for [`route_weight`].
pub fn route_shares(route: &Value, services: &[&str]) -> Vec<i32> {
    let namespace = route.pointer("/metadata/namespace").and_then(Value::as_str);
    let mut shares = vec![0; services.len()];
    let rules = route.pointer("/spec/rules").and_then(Value::as_array);
    for refs in rules
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("backendRefs")?.as_array())
    {
        let sum = |name: &str| -> i64 {
            refs.iter()
                .filter(|b| refers_to(b, name, namespace))
                .map(weight)
                .sum()
        };
        let each: Vec<i64> = services.iter().map(|s| sum(s)).collect();
        let total: i64 = each.iter().sum();
        let to_i32 = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
        for (share, w) in shares.iter_mut().zip(&each) {
            *share = (*share).max(percent(to_i32(*w), to_i32(total)));
        }
    }
    shares
}

/// The backends of a split that would start receiving traffic: weight above 0 here, none in
/// the route as it stands (not named, or only at weight 0). Before the route names them, their
/// Services must have ready endpoints: a Gateway answers 500 for a backendRef it cannot
/// resolve (Gateway API), and a Service created a moment ago has no EndpointSlice yet.
pub fn newly_weighted(route: &Value, backends: &[(&str, i32)]) -> Vec<String> {
    let names: Vec<&str> = backends.iter().map(|(n, _)| *n).collect();
    let now = route_shares(route, &names);
    backends
        .iter()
        .zip(now)
        .filter(|((_, w), share)| *w > 0 && *share == 0)
        .map(|((n, _), _)| n.to_string())
        .collect()
}

/// The core Services (in the route's namespace) the route sends traffic to, in order.
pub fn route_services(route: &Value) -> Vec<String> {
    let namespace = route.pointer("/metadata/namespace").and_then(Value::as_str);
    let mut names: Vec<String> = Vec::new();
    let refs = route
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for backend in refs
        .filter_map(|r| r.get("backendRefs")?.as_array())
        .flatten()
    {
        if let Some(name) = backend.get("name").and_then(Value::as_str) {
            if refers_to(backend, name, namespace) && !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

fn rules(route: &Value) -> Result<&Vec<Value>, WorkloadError> {
    route
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .filter(|rules| !rules.is_empty())
        .ok_or_else(|| WorkloadError::RouteWithoutRules {
            route: route_name(route),
        })
}

fn rules_patch(route: &Value, rules: Vec<Value>) -> Value {
    let mut patch = Map::new();
    if let Some(version) = route.pointer("/metadata/resourceVersion") {
        patch.insert("metadata".into(), json!({ "resourceVersion": version }));
    }
    patch.insert("spec".into(), json!({ "rules": rules }));
    Value::Object(patch)
}

/// A backendRef to the core Service `name` in the route's namespace.
fn refers_to(backend: &Value, name: &str, route_namespace: Option<&str>) -> bool {
    let field = |key: &str| backend.get(key).and_then(Value::as_str);
    field("name") == Some(name)
        && field("kind").unwrap_or("Service") == "Service"
        && field("group").unwrap_or("").is_empty()
        && (field("namespace").is_none() || field("namespace") == route_namespace)
}

/// Gateway API's default weight is 1.
fn weight(backend: &Value) -> i64 {
    backend.get("weight").and_then(Value::as_i64).unwrap_or(1)
}

fn route_name(route: &Value) -> String {
    route
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("(unnamed)")
        .to_string()
}
