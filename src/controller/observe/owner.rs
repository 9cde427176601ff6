//! Which objects are this experiment's: the one test every write and delete goes through, and
//! the one place a name clash is decided (`not_ours`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::{Resource, ResourceExt};

use crate::api::ConcurrencyExperiment;
use crate::workload::LABEL_VARIANT;

/// True when `obj` has an owner reference to this experiment's UID: the operator made it for
/// this experiment. Labels are no proof — anyone can copy them (a copy of the candidate's
/// manifest, another tool).
pub fn owned_by<K: Resource>(obj: &K, exp: &ConcurrencyExperiment) -> bool {
    exp.uid()
        .is_some_and(|uid| obj.owner_references().iter().any(|r| r.uid == uid))
}

/// The variant Service this experiment made for `variant` (a `LABEL_VARIANT` value), found by
/// owner and label — so a user Service that no longer selects the target does not hide it.
pub fn owned_variant_service<'a>(
    exp: &ConcurrencyExperiment,
    services: &'a [Service],
    variant: &str,
) -> Option<&'a Service> {
    services.iter().find(|s| {
        owned_by(*s, exp) && s.labels().get(LABEL_VARIANT).map(String::as_str) == Some(variant)
    })
}

/// Of the objects found by this experiment's names (Deployments found; Services by the names
/// it would give them, looked up in `services`), those it did not make, as "Kind name". The
/// operator never writes or deletes them; the stage machine refuses to start, or rolls back.
pub fn not_ours<'a>(
    exp: &ConcurrencyExperiment,
    deployments: impl IntoIterator<Item = &'a Deployment>,
    service_names: &[String],
    services: &[Service],
) -> Vec<String> {
    let mut found: Vec<String> = deployments
        .into_iter()
        .filter(|d| !owned_by(*d, exp))
        .map(|d| format!("Deployment {}", d.name_any()))
        .collect();
    for name in service_names {
        if services
            .iter()
            .any(|s| s.name_any() == *name && !owned_by(s, exp))
        {
            found.push(format!("Service {name}"));
        }
    }
    found
}
