//! The experiments of the scenarios: short stages (30/70/100) and intervals.

use anyhow::Context as _;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{json, Value};

use crate::{prometheus_in_cluster, ConcurrencyExperiment, Result, Scenario};

/// Latency (p90 at most +50 % and 250 ms) and error rate.
pub fn latency_check() -> Value {
    json!([
        {"metric": "latency", "quantile": 0.9, "maxIncrease": "50%", "max": "250ms"},
        {"metric": "errorRate", "max": "5%"},
    ])
}
/// For scenarios about something other than judgement (a retry, flag rewriting) that run side
/// by side on a 2-core machine: the relative latency check there compares a candidate at 100 %
/// with a baseline measured earlier under other scenarios' load, and flaked (+70 % in one run).
pub fn tolerant_check() -> Value {
    json!([
        {"metric": "latency", "quantile": 0.9, "max": "1s"},
        {"metric": "errorRate", "max": "5%"},
    ])
}

/// An experiment on `storefront`'s container `web`.
#[derive(Debug, Clone)]
pub struct Exp {
    pub name: String,
    pub candidate: Value,
    pub checks: Value,
    pub stage_s: u32,
    pub interval_s: u32,
    pub inconclusive_limit: u32,
    pub on_inconclusive: String,
    /// Merged into `spec` (e.g. `promotion`, `traffic`, `progressDeadline`).
    pub extra: Value,
}

impl Exp {
    pub fn new(name: &str, candidate: Value, checks: Value) -> Self {
        Exp {
            name: name.into(),
            candidate,
            checks,
            stage_s: 25,
            interval_s: 10,
            inconclusive_limit: 4,
            on_inconclusive: "rollback".into(),
            extra: json!({}),
        }
    }
    pub fn stage_s(mut self, s: u32) -> Self {
        self.stage_s = s;
        self
    }
    pub fn interval_s(mut self, s: u32) -> Self {
        self.interval_s = s;
        self
    }
    pub fn inconclusive_limit(mut self, n: u32) -> Self {
        self.inconclusive_limit = n;
        self
    }
    pub fn on_inconclusive(mut self, action: &str) -> Self {
        self.on_inconclusive = action.into();
        self
    }
    /// Merged into what is there (`selecting` sets `candidates` and `selection`).
    pub fn extra(mut self, spec: Value) -> Self {
        merge(&mut self.extra, &spec);
        self
    }

    /// An experiment choosing among `candidates` (issue 12), with this `selection`.
    pub fn selecting(name: &str, candidates: Value, selection: Value, checks: Value) -> Self {
        Exp::new(name, Value::Null, checks)
            .extra(json!({"candidates": candidates, "selection": selection}))
    }

    /// The typed object (a field the CRD types do not know fails here, before the apiserver).
    pub fn object(&self) -> Result<ConcurrencyExperiment> {
        let stage = format!("{}s", self.stage_s);
        let mut spec = json!({
            "targetRef": {"name": "storefront"},
            "container": "web",
            "candidate": self.candidate,
            "stages": [
                {"weight": 30, "duration": stage},
                {"weight": 70, "duration": stage},
                {"weight": 100, "duration": stage},
            ],
            "analysis": {
                "prometheus": {"url": prometheus_in_cluster()},
                "interval": format!("{}s", self.interval_s),
                "failureLimit": 0,
                "inconclusiveLimit": self.inconclusive_limit,
                "onInconclusive": self.on_inconclusive,
                "minRequests": 10,
                "checks": self.checks,
            },
        });
        if self.candidate.is_null() {
            spec.as_object_mut().map(|o| o.remove("candidate"));
        }
        merge(&mut spec, &self.extra);
        from_spec(&self.name, spec)
    }
}

/// A `ConcurrencyExperiment` named `name` with this spec.
pub fn from_spec(name: &str, spec: Value) -> Result<ConcurrencyExperiment> {
    let obj = json!({
        "apiVersion": "concurrency.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": spec,
    });
    serde_json::from_value(obj)
        .with_context(|| format!("experiment {name} does not fit the CRD types"))
}

/// JSON merge patch semantics, objects only.
fn merge(into: &mut Value, from: &Value) {
    if let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in from {
            match into.get_mut(k) {
                Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                _ => {
                    into.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

impl Scenario {
    /// Creates the experiment.
    pub async fn apply(&self, e: &Exp) -> Result {
        self.create_cexp(e.object()?).await
    }

    /// Deletes the experiment and waits until it is gone (its finalizer done).
    pub async fn delete_cexp(&self, name: &str, secs: u64) -> Result {
        let uid = self.cexp(name).await?.metadata.uid.unwrap_or_default();
        self.cexps.delete(name, &DeleteParams::default()).await?;
        let api = self.cexps.clone();
        crate::within(secs, &format!("experiment {name} deleted"), async move {
            await_condition(api, name, conditions::is_deleted(&uid)).await?;
            Ok(())
        })
        .await
    }

    pub async fn create_cexp(&self, e: ConcurrencyExperiment) -> Result {
        let name = e.metadata.name.clone().unwrap_or_default();
        self.cexps
            .create(&PostParams::default(), &e)
            .await
            .with_context(|| format!("creating experiment {name}"))?;
        Ok(())
    }
}
