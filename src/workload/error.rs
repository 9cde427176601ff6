//! Why a target, Service or HTTPRoute cannot be rendered into variants.

/// Rendering errors. Each message names the field or object at fault so it can go straight
/// into status and an Event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error(
        "spec.container: container {name:?} not found in Deployment {deployment} (containers: {})",
        containers.join(", ")
    )]
    ContainerNotFound {
        name: String,
        deployment: String,
        containers: Vec<String>,
    },
    #[error("spec.targetRef: Deployment {deployment} has no containers in spec.template.spec.containers")]
    NoContainers { deployment: String },
    #[error("spec.targetRef: Deployment {deployment} has no spec.selector.matchLabels")]
    NoSelector { deployment: String },
    #[error(
        "spec.targetRef: Deployment {deployment} selects pods with spec.selector.matchExpressions; \
         only matchLabels selectors are supported (candidate pods must join the same selector)"
    )]
    MatchExpressionsSelector { deployment: String },
    #[error("spec.candidates has no entry {index}: the list was edited since it was read")]
    NoSuchCandidate { index: usize },
    #[error("{kind} {name:?} is missing {field}")]
    MissingField {
        kind: &'static str,
        name: String,
        field: &'static str,
    },
    #[error("spec.traffic.service: Service {service} has no spec.ports to copy")]
    ServiceWithoutPorts { service: String },
    #[error(
        "spec.traffic.service: no Service{} selects the pods of Deployment {deployment}; \
         set spec.traffic.service",
        if *via_route { " referenced by the HTTPRoute" } else { "" }
    )]
    NoTargetService { deployment: String, via_route: bool },
    #[error(
        "spec.traffic.service: Services {} all select the pods of Deployment {deployment}; \
         set spec.traffic.service to the one the HTTPRoute should split",
        services.join(", ")
    )]
    AmbiguousTargetService {
        deployment: String,
        services: Vec<String>,
    },
    #[error("spec.traffic.service: Service {service} not found")]
    ServiceNotFound { service: String },
    #[error("spec.traffic.httpRoute: HTTPRoute {route} has no spec.rules")]
    RouteWithoutRules { route: String },
    #[error(
        "spec.traffic.httpRoute: no rule of HTTPRoute {route} has a backendRef to Service {service}"
    )]
    ServiceNotInRoute { route: String, service: String },
    #[error("status.original.routeBackendRefs: not a JSON list of backendRefs per rule: {0}")]
    StoredRouteRefs(String),
    #[error(
        "spec.candidate: container {container} of the target has `{written}` in {location}, \
         which would override the candidate's {setting} but cannot be rewritten safely: {reason}"
    )]
    UnrewritableFlag {
        container: String,
        location: String,
        written: String,
        setting: String,
        reason: String,
    },
    #[error(
        "spec.candidate: container {container} of the target starts the server from the shell \
         string in {location}, which cannot be read ({reason}), so flags in it that would \
         override the candidate's config cannot be rewritten"
    )]
    UnreadableScript {
        container: String,
        location: String,
        reason: &'static str,
    },
    #[error(
        "{field}: `{written}` contradicts {setting} (the server's flag would win); drop it or \
         make it agree"
    )]
    ContradictingFlag {
        field: String,
        written: String,
        setting: String,
    },
}

impl WorkloadError {
    /// Short category: the Event reason and metric label.
    pub fn category(&self) -> &'static str {
        match self {
            WorkloadError::ContainerNotFound { .. } => "ContainerNotFound",
            WorkloadError::NoContainers { .. } => "NoContainers",
            WorkloadError::NoSelector { .. } | WorkloadError::MatchExpressionsSelector { .. } => {
                "UnsupportedSelector"
            }
            WorkloadError::MissingField { .. } => "MissingField",
            WorkloadError::NoSuchCandidate { .. } => "NoSuchCandidate",
            WorkloadError::NoTargetService { .. } | WorkloadError::ServiceNotFound { .. } => {
                "ServiceNotFound"
            }
            WorkloadError::AmbiguousTargetService { .. } => "AmbiguousService",
            WorkloadError::ServiceWithoutPorts { .. } => "ServiceWithoutPorts",
            WorkloadError::RouteWithoutRules { .. } => "InvalidRoute",
            WorkloadError::ServiceNotInRoute { .. } => "ServiceNotInRoute",
            WorkloadError::StoredRouteRefs(_) => "InvalidOriginalRoute",
            WorkloadError::UnrewritableFlag { .. } | WorkloadError::UnreadableScript { .. } => {
                "UnrewritableFlags"
            }
            WorkloadError::ContradictingFlag { .. } => "ContradictingFlags",
        }
    }
}
