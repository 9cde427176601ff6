//! The `kubectl concurrency` plugin: read and steer experiments from a terminal, and size a
//! running Deployment without one.
//!
//! `src/bin/kubectl-concurrency.rs` only parses the command line ([`cli`]) and prints; the
//! commands live here so they can be tested against a mocked API server. Renderers are pure
//! functions of the objects and the current time (exact-output tests); the Kubernetes and
//! Prometheus calls are a thin layer around them.

pub mod capacity;
pub mod cli;
pub mod control;
pub mod dashboard;
pub mod follow;
pub mod get;
pub mod history;
pub mod init;
pub mod recommend;
pub mod render;
pub mod report;
pub mod selection;
pub mod table;

use std::io::Write;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

use crate::analysis::PrometheusError;
use crate::api::ConcurrencyExperiment;
use crate::workload::WorkloadError;

pub use cli::{Cli, Command};

/// Why a command failed. Every variant prints as one line naming what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{kind} {name:?} not found in namespace {namespace:?}")]
    NotFound {
        kind: &'static str,
        name: String,
        namespace: String,
    },
    #[error(
        "the ConcurrencyExperiment CRD is not installed in this cluster \
         (kubectl apply -f crds/, or install the Helm chart)"
    )]
    CrdMissing,
    #[error("permission denied (403, RBAC): cannot {verb} {resource} in namespace {namespace:?}: {message}")]
    Forbidden {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        message: String,
    },
    /// The experiment's phase does not allow the command; the text says why and what would.
    #[error("{0}")]
    Refused(String),
    #[error(
        "{name} changed {attempts} times while it was being updated; try again \
         (the operator may be writing it right now)"
    )]
    Conflict { name: String, attempts: usize },
    #[error("cannot {verb} {resource} in namespace {namespace:?}: {message}")]
    Api {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        message: String,
    },
    #[error("cannot connect to Kubernetes: {0}")]
    Connect(String),
    #[error(transparent)]
    Prometheus(#[from] PrometheusError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A usage problem clap cannot express (e.g. `--threads` with `--server falcon`).
    #[error("{0}")]
    Usage(String),
    /// Some Prometheus queries returned nothing; `report` is what could be computed anyway.
    #[error("no data from Prometheus for {}: see the queries above (is the exporter scraped, and did the pods serve requests in the window?)", missing.join(", "))]
    NoData {
        report: String,
        missing: Vec<String>,
    },
    /// `get NAME -w --timeout`: the experiment had not finished in time.
    #[error("{name} did not finish within {after} (phase {phase})")]
    Timeout {
        name: String,
        after: String,
        phase: &'static str,
    },
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

impl PluginError {
    /// Output computed before the error, to print on stdout before the error line.
    pub fn partial_output(&self) -> Option<&str> {
        match self {
            PluginError::NoData { report, .. } => Some(report),
            _ => None,
        }
    }
}

/// What a request was doing, for its error message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op<'a> {
    pub verb: &'static str,
    pub resource: &'static str,
    /// The object's kind for "not found", e.g. `ConcurrencyExperiment`.
    pub kind: &'static str,
    pub name: Option<&'a str>,
    pub namespace: &'a str,
}

impl<'a> Op<'a> {
    pub fn experiment(verb: &'static str, name: Option<&'a str>, namespace: &'a str) -> Self {
        Op {
            verb,
            resource: "concurrencyexperiments",
            kind: "ConcurrencyExperiment",
            name,
            namespace,
        }
    }

    pub fn deployment(verb: &'static str, name: &'a str, namespace: &'a str) -> Self {
        Op {
            verb,
            resource: "deployments",
            kind: "Deployment",
            name: Some(name),
            namespace,
        }
    }
}

/// Error messages are printed as one line whatever the API server put into them.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Maps a Kubernetes error to what the user needs to know: not found (the object, or the whole
/// CRD), RBAC denial, or the server's own message.
pub(crate) fn api_error(e: kube::Error, op: Op<'_>) -> PluginError {
    let namespace = op.namespace.to_string();
    match &e {
        kube::Error::Api(s) if s.is_forbidden() => PluginError::Forbidden {
            verb: op.verb,
            resource: op.resource,
            namespace,
            message: one_line(&s.message),
        },
        kube::Error::Api(s) if s.is_not_found() => {
            // A missing object names itself in `details`; a missing resource type (the CRD is
            // not installed) is a bare 404 for the whole path.
            let named = s.details.as_ref().is_some_and(|d| !d.name.is_empty());
            match op.name {
                Some(name) if named || op.resource != "concurrencyexperiments" => {
                    PluginError::NotFound {
                        kind: op.kind,
                        name: name.to_string(),
                        namespace,
                    }
                }
                _ => PluginError::CrdMissing,
            }
        }
        kube::Error::Api(s) => PluginError::Api {
            verb: op.verb,
            resource: op.resource,
            namespace,
            message: one_line(&format!("{} ({}, {})", s.message, s.reason, s.code)),
        },
        other => PluginError::Api {
            verb: op.verb,
            resource: op.resource,
            namespace,
            message: one_line(&other.to_string()),
        },
    }
}

/// A client and the namespace the command works in.
#[derive(Clone)]
pub struct Session {
    pub client: Client,
    pub namespace: String,
}

impl Session {
    /// From the kubeconfig (`--context` picks a context) or the in-cluster config; the
    /// namespace is `-n`, else the context's, else `default` — as kubectl does.
    pub async fn connect(cli: &Cli) -> Result<Session, PluginError> {
        let (context, namespace) = (cli.context.as_deref(), cli.namespace.as_deref());
        let config = match context {
            Some(context) => {
                let options = kube::config::KubeConfigOptions {
                    context: Some(context.to_string()),
                    ..Default::default()
                };
                kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|e| PluginError::Connect(one_line(&e.to_string())))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| PluginError::Connect(one_line(&e.to_string())))?,
        };
        let mut config = config;
        if let Some(user) = &cli.as_user {
            config.auth_info.impersonate = Some(user.clone());
        }
        if !cli.as_groups.is_empty() {
            config.auth_info.impersonate_groups = Some(cli.as_groups.clone());
        }
        let default_namespace = config.default_namespace.clone();
        let client =
            Client::try_from(config).map_err(|e| PluginError::Connect(one_line(&e.to_string())))?;
        Ok(Session {
            client,
            namespace: namespace.map_or(default_namespace, str::to_string),
        })
    }

    pub fn experiments(&self) -> Api<ConcurrencyExperiment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub async fn experiment(&self, name: &str) -> Result<ConcurrencyExperiment, PluginError> {
        self.experiments()
            .get(name)
            .await
            .map_err(|e| api_error(e, Op::experiment("get", Some(name), &self.namespace)))
    }

    pub async fn deployment(&self, name: &str) -> Result<Deployment, PluginError> {
        self.deployments()
            .get(name)
            .await
            .map_err(|e| api_error(e, Op::deployment("get", name, &self.namespace)))
    }
}

/// Runs one command, writing its output to `out`.
pub async fn run(
    session: &Session,
    command: Command,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    match command {
        Command::Get(args) => get::run(session, &args, out).await,
        Command::Approve(a) => control::run(session, control::Control::Approve, &a.name, out).await,
        Command::Abort(a) => control::run(session, control::Control::Abort, &a.name, out).await,
        Command::Retry(a) => control::run(session, control::Control::Retry, &a.name, out).await,
        Command::Pause(a) => control::run(session, control::Control::Pause, &a.name, out).await,
        Command::Resume(a) => control::run(session, control::Control::Resume, &a.name, out).await,
        Command::History(a) => history::run(session, &a.name, out).await,
        Command::Recommend(args) => recommend::run(session, &args, out).await,
        Command::Init(args) => init::run(session, &args, out).await,
        Command::Report(args) => report::run(session, &args, out).await,
        Command::Dashboard(args) => dashboard::run(session, &args, out).await,
    }
}

#[cfg(test)]
mod tests;
