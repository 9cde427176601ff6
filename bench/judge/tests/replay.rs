//! The bench's own parts: Prometheus's quantile, README's manifest read as the operator reads
//! it, and both judges on traces built here (not recorded) whose answer is known.

use std::path::Path;

use judge_bench::bootstrap::{resample, Rng};
use judge_bench::manifest::{load_spec, Plan};
use judge_bench::replay::{run, Rule};
use judge_bench::trace::{histogram_quantile, Series, Trace};

#[test]
fn histogram_quantile_reads_buckets_as_prometheus_does() {
    let bounds = [0.1, 0.2, 0.5];
    let cumulative = [10.0, 20.0, 30.0, 40.0];
    let q = |q| histogram_quantile(q, &bounds, &cumulative).unwrap();
    assert!((q(0.25) - 0.1).abs() < 1e-12); // the first bucket from 0
    assert!((q(0.5) - 0.2).abs() < 1e-12);
    assert!((q(0.6) - 0.32).abs() < 1e-12);
    assert_eq!(q(0.9), 0.5); // +Inf: the last finite bound
    assert_eq!(
        histogram_quantile(0.5, &bounds, &[0.0, 0.0, 0.0, 0.0]),
        None
    );
}

fn readme_plan() -> Plan {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let spec = load_spec(&readme).unwrap();
    Plan::from_spec("README.md", &spec).unwrap()
}

#[test]
fn readmes_first_manifest_is_thirty_analyses_of_three_checks() {
    let plan = readme_plan();
    assert_eq!(plan.analyses, vec![10, 10, 10]);
    assert_eq!(plan.interval_seconds, 60);
    assert_eq!(plan.checks.len(), 3, "{:?}", plan.skipped);
}

/// 60 steps of 5 s, 50 requests each, latencies in the 50–100 ms bucket (×`slow` in the
/// 100–250 ms one for the candidate), no errors, flat memory.
fn trace(candidate_slow: bool) -> Trace {
    let bounds = vec![0.05, 0.1, 0.25, 0.5];
    let series = |slow: bool| {
        let row = if slow {
            vec![0.0, 0.0, 50.0, 50.0, 50.0]
        } else {
            vec![0.0, 50.0, 50.0, 50.0, 50.0]
        };
        Series {
            requests: vec![50.0; 60],
            errors: vec![0.0; 60],
            latency: vec![row.clone(); 60],
            queue: vec![vec![50.0; 5]; 60],
            memory: vec![100e6; 60],
        }
    };
    Trace {
        name: "built".into(),
        regression: candidate_slow.then(|| "latency ×2.5".into()),
        recorded: "built in the test".into(),
        step_seconds: 5,
        rate: 10,
        baseline_env: vec![],
        candidate_env: vec![],
        latency_bounds: bounds.clone(),
        queue_bounds: bounds,
        baseline: series(false),
        candidate: series(candidate_slow),
    }
}

#[test]
fn both_judges_promote_the_same_config_and_roll_back_a_slower_one() {
    let plan = readme_plan();
    for rule in [Rule::PerInterval, Rule::Sequential { alpha: 0.05 }] {
        let mut rng = Rng(1);
        let same = resample(&trace(false), &plan, 5, &mut rng).unwrap();
        assert_eq!(
            same.len(),
            60,
            "twice the 30 analyses: a waiting stage runs past its duration"
        );
        assert_eq!(
            run(&plan, rule, &trace(false), &same).rolled_back_at,
            None,
            "{rule:?}"
        );
        let slower = resample(&trace(true), &plan, 5, &mut rng).unwrap();
        let outcome = run(&plan, rule, &trace(true), &slower);
        assert!(outcome.rolled_back_at.is_some(), "{rule:?}: {outcome:?}");
        assert!(outcome.why.iter().any(|w| w == "latency"), "{outcome:?}");
    }
}
