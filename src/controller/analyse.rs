//! Running one analysis from a reconcile: where the variants are, and a Prometheus client with
//! the configured timeout. A Prometheus that cannot even be addressed is an Inconclusive
//! analysis (never a Pass, never a reconcile error), like any other Prometheus failure.
//!
//! Clients are kept per URL and timeout: each holds an HTTP connection pool (and its TLS
//! setup), which a new client per analysis would build and throw away every interval.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::context::Context;
use super::error::{Error, Result};
use super::observe::Fetched;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::analysis::{self, AnalysisContext};
use crate::api::{AnalysisRecord, ConcurrencyExperiment, ConcurrencyExperimentStatus, Verdict};
use crate::plan::AnalysisOutcome;
use crate::prometheus::{PrometheusClient, PrometheusError};
use crate::telemetry::Metrics;
use crate::workload;

/// Distinct Prometheus endpoints kept; experiments rarely use more than one or two.
pub const MAX_PROMETHEUS_CLIENTS: usize = 16;

/// Prometheus clients by (URL, timeout), least recently used first; the oldest is dropped
/// beyond [`MAX_PROMETHEUS_CLIENTS`], so URLs from long-deleted experiments do not pile up.
#[derive(Default)]
pub struct PrometheusClients {
    clients: Mutex<Vec<((String, Duration), PrometheusClient)>>,
}

impl PrometheusClients {
    /// The client for `url`, made on first use; its queries are timed into
    /// `concurrency_prometheus_query_duration_seconds`. A URL that cannot be used is not kept.
    pub fn client(
        &self,
        url: &str,
        timeout: Duration,
        metrics: &Metrics,
    ) -> Result<PrometheusClient, PrometheusError> {
        let mut clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let key = (url.to_string(), timeout);
        if let Some(i) = clients.iter().position(|(k, _)| *k == key) {
            let entry = clients.remove(i);
            let client = entry.1.clone();
            clients.push(entry);
            return Ok(client);
        }
        let metrics = metrics.clone();
        let client = PrometheusClient::new(url, timeout)?
            .timed(Arc::new(move |d| metrics.observe_prometheus_query(d)));
        if clients.len() >= MAX_PROMETHEUS_CLIENTS {
            clients.remove(0);
        }
        clients.push((key, client.clone()));
        Ok(client)
    }

    /// The URLs kept, least recently used first.
    pub fn urls(&self) -> Vec<String> {
        let clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        clients.iter().map(|((url, _), _)| url.clone()).collect()
    }
}

/// Where the analysis looks, or `None` when the target is gone (nothing to compare).
pub fn analysis_context(
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    effective_weight: i32,
    now: Timestamp,
) -> Result<Option<AnalysisContext>> {
    let Some(target) = &fetched.target else {
        return Ok(None);
    };
    let name = exp.spec.container.as_deref();
    let container = workload::app_container(target, name)?;
    let (baseline_cpu_limit, candidate_cpu_limit) = cpu_limits(exp, container);
    Ok(Some(AnalysisContext {
        namespace: exp.namespace().ok_or(Error::MissingNamespace)?,
        container: container.name.clone(),
        baseline_deployment: target.name_any(),
        candidate_deployment: workload::candidate_name(&target.name_any()),
        stage_index: status.stage_index.unwrap_or_default(),
        weight: effective_weight,
        now,
        baseline_config: workload::read_baseline(target, name, &fetched.configmaps).ok(),
        baseline_cpu_limit,
        candidate_cpu_limit,
    }))
}

/// The app container's CPU limit (cores) in the baseline and in the candidate: the candidate
/// gets `spec.candidate.resources` in place of the target's when they are set.
pub fn cpu_limits(
    exp: &ConcurrencyExperiment,
    target_container: &Container,
) -> (Option<f64>, Option<f64>) {
    let baseline = analysis::cpu_limit(target_container.resources.as_ref());
    let candidate = match &exp.spec.candidate.resources {
        Some(r) => analysis::cpu_limit(Some(r)),
        None => baseline,
    };
    (baseline, candidate)
}

pub async fn run(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    status: &ConcurrencyExperimentStatus,
    effective_weight: i32,
    now: Timestamp,
) -> Result<Option<AnalysisOutcome>> {
    let Some(actx) = analysis_context(exp, fetched, status, effective_weight, now)? else {
        return Ok(None);
    };
    let url = &exp.spec.analysis.prometheus.url;
    let client = ctx
        .prometheus
        .client(url, ctx.settings.prometheus_timeout, &ctx.metrics);
    let outcome = match client {
        Ok(client) => {
            let (history, reference) = (&status.analyses, &status.baseline_reference);
            analysis::analyse(&client, &exp.spec, &actx, history, reference).await
        }
        Err(e) => AnalysisOutcome {
            record: AnalysisRecord {
                at: Time(now),
                stage_index: actx.stage_index,
                weight: actx.weight,
                verdict: Verdict::Inconclusive,
                baseline_requests: None,
                candidate_requests: None,
                checks: Vec::new(),
                reason: Some(format!("Prometheus {url}: {e}")),
                capacity: None,
            },
            recommendation: None,
            no_data: false,
        },
    };
    Ok(Some(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidate_has_its_own_cpu_limit_only_when_it_sets_resources() {
        let mut exp = crate::controller::fixtures::experiment();
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "web", "resources": {"limits": {"cpu": "500m"}}
        }))
        .unwrap();
        assert_eq!(cpu_limits(&exp, &container), (Some(0.5), Some(0.5)));
        // Resources given replace the target's whole: no cpu limit there is none at all.
        exp.spec.candidate.resources =
            Some(serde_json::from_value(serde_json::json!({"limits": {"memory": "1Gi"}})).unwrap());
        assert_eq!(cpu_limits(&exp, &container), (Some(0.5), None));
        exp.spec.candidate.resources =
            Some(serde_json::from_value(serde_json::json!({"limits": {"cpu": "2"}})).unwrap());
        assert_eq!(cpu_limits(&exp, &container), (Some(0.5), Some(2.0)));
    }

    #[test]
    fn clients_are_kept_per_url_and_timeout_and_bounded() {
        let clients = PrometheusClients::default();
        let metrics = Metrics::new();
        let t = Duration::from_secs(10);
        let url = |i: usize| format!("http://prometheus-{i}.monitoring:9090");
        clients.client(&url(0), t, &metrics).unwrap();
        clients.client(&url(0), t, &metrics).unwrap();
        assert_eq!(clients.urls(), [url(0)], "reused");
        clients
            .client(&url(0), Duration::from_secs(5), &metrics)
            .unwrap();
        assert_eq!(clients.urls().len(), 2, "another timeout is another client");
        assert!(clients.client("not a url", t, &metrics).is_err());
        assert_eq!(clients.urls().len(), 2, "a bad URL is not kept");
        for i in 1..=MAX_PROMETHEUS_CLIENTS {
            clients.client(&url(i), t, &metrics).unwrap();
            // url(0) with the default timeout stays in use throughout.
            clients.client(&url(0), t, &metrics).unwrap();
        }
        let urls = clients.urls();
        assert_eq!(urls.len(), MAX_PROMETHEUS_CLIENTS);
        assert_eq!(urls.last(), Some(&url(0)), "the one in use is kept");
        assert!(
            !urls.contains(&url(1)),
            "the least recently used went first"
        );
    }

    #[tokio::test]
    async fn queries_are_timed_into_the_histogram() {
        let clients = PrometheusClients::default();
        let metrics = Metrics::new();
        // Nothing listens there: the query fails fast, and still counts.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let client = clients
            .client(&url, Duration::from_secs(5), &metrics)
            .unwrap();
        assert!(client.query_value("up", Timestamp::now()).await.is_err());
        let text = metrics.encode();
        assert!(
            text.contains("concurrency_prometheus_query_duration_seconds_count 1"),
            "{text}"
        );
    }
}
