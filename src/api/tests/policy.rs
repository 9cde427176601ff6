//! The override policy names the first forbidden field, in the candidate or a selection's.

use crate::api::policy::forbidden_override;
use crate::api::ConcurrencyExperimentSpec;

fn spec(candidates: &str) -> ConcurrencyExperimentSpec {
    serde_yaml::from_str(&format!(
        "targetRef: {{name: storefront}}\n{candidates}\nanalysis:\n  checks: [{{metric: latency, max: 1s}}]\n"
    ))
    .unwrap()
}

#[test]
fn only_command_args_and_env_are_overrides() {
    assert_eq!(
        forbidden_override(&spec(
            "candidate: {server: puma, workers: 2, threads: 4, dbPool: 8}"
        )),
        None
    );
    let args = forbidden_override(&spec("candidate: {server: puma, args: [-t, '4']}")).unwrap();
    assert!(args.starts_with("spec.candidate.args: "), "{args}");
    let env = forbidden_override(&spec(
        "candidates: [{server: puma, threads: 4}, {server: falcon, env: [{name: A, value: b}]}]",
    ))
    .unwrap();
    assert!(env.starts_with("spec.candidates[1].env: "), "{env}");
}
