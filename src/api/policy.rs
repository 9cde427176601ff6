//! The platform team's policy on what an experiment may set. A candidate's `command`, `args`
//! and `env` run with the target's ServiceAccount: an operator started with
//! `--allow-candidate-overrides=false` (Helm value `policy.candidateOverrides: false`) refuses
//! them, so an experiment can only change what the server config renders.

use super::{ConcurrencyExperimentSpec, ServerConfig};

/// The first override the policy forbids, as `field: why`; `None` when the spec has none.
pub fn forbidden_override(spec: &ConcurrencyExperimentSpec) -> Option<String> {
    let one = |field: String, c: &ServerConfig| {
        let set = [
            ("command", c.command.is_some()),
            ("args", c.args.is_some()),
            ("env", !c.env.is_empty()),
        ];
        set.into_iter().find(|(_, on)| *on).map(|(name, _)| {
            format!(
                "{field}.{name}: this operator refuses candidate command, args and env \
                 (Helm value policy.candidateOverrides: false): they would run with the \
                 target's ServiceAccount; set workers, threads, dbPool or falcon instead, or ask \
                 the platform team"
            )
        })
    };
    let single = spec
        .candidate
        .as_ref()
        .and_then(|c| one("spec.candidate".into(), c));
    single.or_else(|| {
        spec.candidate_list()
            .iter()
            .enumerate()
            .find_map(|(i, c)| one(format!("spec.candidates[{i}]"), c))
    })
}
