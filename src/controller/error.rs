//! Reconcile errors. Each has a short CamelCase category, used as the Event reason and the
//! `error` metric label, so alerts and `kubectl describe` agree on names.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API call failed: {0}")]
    Kube(#[source] kube::Error),

    #[error("{what} could not be serialized: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },

    #[error("the experiment has no namespace")]
    MissingNamespace,

    #[error("cannot {action} without the target Deployment")]
    TargetMissing { action: &'static str },

    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),

    #[error("{kind} {name} exists and is not managed by this experiment; it is left alone")]
    NotOwned { kind: String, name: String },

    #[error("HTTPRoute {name}: {reason}")]
    Route { name: String, reason: String },

    #[error("status update still conflicted after {attempts} attempts")]
    StatusConflict { attempts: u32 },

    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// Short category for Event reasons and metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "ApiConflict",
            Error::Kube(kube::Error::Api(s)) if s.code == 403 => "ApiForbidden",
            Error::Kube(kube::Error::Api(s)) if s.code == 422 => "ApiInvalid",
            Error::Kube(_) => "KubeApi",
            Error::Serialize { .. } => "Serialization",
            Error::MissingNamespace => "MissingNamespace",
            Error::TargetMissing { .. } => "TargetMissing",
            Error::Workload(e) => e.category(),
            Error::NotOwned { .. } => "NotOwned",
            Error::Route { .. } => "RouteInvalid",
            Error::StatusConflict { .. } => "StatusConflict",
            Error::Config(_) => "Config",
        }
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(e)
    }
}

/// True for a 404 from the API server (already gone: fine for deletes and lookups).
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True for a 422: for the operator's own JSON patches, a failed `test` (the object changed
/// since the copy the patch was made from).
pub fn is_invalid(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422)
}

/// True for a 409 (optimistic concurrency conflict).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
