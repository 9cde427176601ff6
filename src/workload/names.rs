//! Names and labels of the objects the operator makes, kept within Kubernetes' length limits.

use std::collections::BTreeMap;

/// Label naming the experiment that made an object (value: [`label_value`] of its name).
pub const LABEL_EXPERIMENT: &str = "concurrency.dev/experiment";
/// Label naming the variant: [`VARIANT_CANDIDATE`] or [`VARIANT_BASELINE`].
pub const LABEL_VARIANT: &str = "concurrency.dev/variant";
pub const VARIANT_CANDIDATE: &str = "candidate";
pub const VARIANT_BASELINE: &str = "baseline";
/// The fresh baseline of a selection or of `baseline.fresh` (docs/selection.md).
pub const VARIANT_FRESH_BASELINE: &str = "fresh-baseline";
/// The label the Deployment controller puts on each ReplicaSet's pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The env variables a server config is rendered into (see `render`).
/// Worker processes, for Puma and for Falcon's `falcon.rb` convention.
pub const ENV_WEB_CONCURRENCY: &str = "WEB_CONCURRENCY";
/// Threads as read by the Rails-generated `config/puma.rb` and `database.yml` (DB pool).
pub const ENV_RAILS_MAX_THREADS: &str = "RAILS_MAX_THREADS";
pub const ENV_PUMA_MAX_THREADS: &str = "PUMA_MAX_THREADS";
pub const ENV_PUMA_MIN_THREADS: &str = "PUMA_MIN_THREADS";
/// ActiveRecord connections per process, where the app's `database.yml` reads it.
pub const ENV_DB_POOL: &str = "DB_POOL";
/// Images that pick their server by env (like the reference images) read this.
pub const ENV_SERVER: &str = "SERVER";

/// Label values and Service names (DNS-1035 labels) are at most 63 characters.
const MAX_LABEL: usize = 63;
/// Pod names are `<deployment>-<hash up to 10>-<5 random>`, and the API server cuts a generated
/// name's base at 58 characters. A candidate name of at most 46 keeps its pod names whole, so
/// the `{{pods}}` regex stays exact and never matches the baseline's pods.
pub(super) const MAX_CANDIDATE_NAME: usize = 46;

/// `<target>-candidate`, shortened with a hash of the target name when too long.
pub fn candidate_name(target_name: &str) -> String {
    fit_name(target_name, "-candidate", MAX_CANDIDATE_NAME)
}

/// A selection's candidate `index` (0-based, as in `spec.candidates`):
/// `<target>-candidate-<index + 1>`, within the same limit as the candidate's name.
pub fn variant_name(target_name: &str, index: usize) -> String {
    fit_name(
        target_name,
        &format!("-candidate-{}", index + 1),
        MAX_CANDIDATE_NAME,
    )
}

/// `<target>-fresh-baseline`: the copy of the target started with the candidates.
pub fn fresh_baseline_name(target_name: &str) -> String {
    fit_name(target_name, "-fresh-baseline", MAX_CANDIDATE_NAME)
}

/// `<service>-candidate-<index + 1>`: the Service an HTTPRoute uses for candidate `index`.
pub fn variant_service_name(service: &str, index: usize) -> String {
    fit_name(service, &format!("-candidate-{}", index + 1), MAX_LABEL)
}

/// `<service>-fresh-baseline`: the Service an HTTPRoute uses for the fresh baseline.
pub fn fresh_baseline_service_name(service: &str) -> String {
    fit_name(service, "-fresh-baseline", MAX_LABEL)
}

/// The `LABEL_VARIANT` value of a selection's candidate `index`: `candidate-<index + 1>`.
pub fn variant_label(index: usize) -> String {
    format!("{VARIANT_CANDIDATE}-{}", index + 1)
}

/// `<service>-baseline`: the Service an HTTPRoute uses for the baseline's pods.
pub fn baseline_service_name(service: &str) -> String {
    fit_name(service, "-baseline", MAX_LABEL)
}

/// `<service>-candidate`: the Service an HTTPRoute uses for the candidate's pods.
pub fn candidate_service_name(service: &str) -> String {
    fit_name(service, "-candidate", MAX_LABEL)
}

/// A name usable as a label value (at most 63 characters).
pub fn label_value(name: &str) -> String {
    fit_name(name, "", MAX_LABEL)
}

/// The two operator labels for one variant of one experiment.
pub fn variant_labels(experiment: &str, variant: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_EXPERIMENT.to_string(), label_value(experiment)),
        (LABEL_VARIANT.to_string(), variant.to_string()),
    ])
}

/// `base + suffix` if it fits in `max`; else a cut `base`, a dash, 8 hex digits of a hash of
/// the whole `base` (so different long names stay different), then `suffix`.
fn fit_name(base: &str, suffix: &str, max: usize) -> String {
    if base.len() + suffix.len() <= max {
        return format!("{base}{suffix}");
    }
    let keep = max.saturating_sub(suffix.len() + 9);
    let cut: String = base.chars().take(keep).collect();
    let cut = cut.trim_end_matches(['-', '.']);
    format!("{cut}-{:08x}{suffix}", fnv1a(base))
}

/// FNV-1a, 32 bits: stable across Rust releases (unlike `DefaultHasher`), so a restarted
/// operator finds the objects it made.
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
