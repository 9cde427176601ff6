//! The bench's own parts: Prometheus's quantile, README's manifest read as the operator reads
//! it, and both judges on traces built here (not recorded) whose answer is known.

use std::path::Path;

use judge_bench::bootstrap::{resample, Rng};
use judge_bench::gate::CAPACITY;
use judge_bench::manifest::{load_spec, Plan};
use judge_bench::replay::{run, Rule};
use judge_bench::trace::{histogram_quantile, Segment, Series, Trace};

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
            running: vec![],
            io_wait: vec![],
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
        stages: vec![],
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

/// README's stages recorded as per-stage loads of 64 requests/s (5-s steps, 72 per stretch):
/// the candidate gets 30, 70, then 100 % of it; every request takes 0.5 ms of CPU and 32 ms of
/// I/O (the GVL counters) and lands in the same latency bucket, so only capacity differs.
fn staged(candidate_threads: &str) -> Trace {
    let bounds = vec![0.05, 0.1, 0.25, 0.5];
    let per_stretch = 72;
    let series = |shares: [f64; 3]| {
        let per_step: Vec<f64> = shares
            .iter()
            .flat_map(|share| std::iter::repeat_n(64.0 * 5.0 * share, per_stretch))
            .collect();
        Series {
            requests: per_step.clone(),
            errors: vec![0.0; per_step.len()],
            latency: per_step.iter().map(|n| vec![0.0, *n, *n, *n, *n]).collect(),
            queue: per_step.iter().map(|n| vec![*n; 5]).collect(),
            memory: vec![100e6; per_step.len()],
            running: per_step.iter().map(|n| n * 0.0005).collect(),
            io_wait: per_step.iter().map(|n| n * 0.032).collect(),
        }
    };
    let env = |threads: &str| {
        vec![
            ("WEB_CONCURRENCY".to_string(), "1".to_string()),
            ("RAILS_MAX_THREADS".to_string(), threads.to_string()),
        ]
    };
    Trace {
        name: format!("staged-{candidate_threads}"),
        regression: (candidate_threads == "2").then(|| "4 → 2 threads".into()),
        recorded: "built in the test".into(),
        step_seconds: 5,
        rate: 64,
        baseline_env: env("4"),
        candidate_env: env(candidate_threads),
        latency_bounds: bounds.clone(),
        queue_bounds: bounds,
        baseline: series([0.7, 0.3, 0.0]),
        candidate: series([0.3, 0.7, 1.0]),
        stages: [30, 70, 100]
            .iter()
            .enumerate()
            .map(|(i, &weight)| Segment {
                weight,
                from: i * per_stretch,
                to: (i + 1) * per_stretch,
            })
            .collect(),
    }
}

#[test]
fn a_staged_trace_gives_each_stage_its_own_stretch_and_100_percent_the_baseline_before_it() {
    let plan = readme_plan();
    let trace = staged("4");
    let draw = resample(&trace, &plan, 5, &mut Rng(7)).unwrap();
    assert_eq!(draw.len(), 60, "twice each stage's 10 analyses");
    let mut cursor = draw.cursor();
    // One-minute analyses of 64 requests/s: the candidate's share of 3,840 per stage.
    for (stage, (baseline, candidate)) in [
        (0, (2688.0, 1152.0)),
        (1, (1152.0, 2688.0)),
        (2, (1152.0, 3840.0)),
    ] {
        let (b, c) = cursor.next(stage).unwrap();
        assert!(
            (b.requests - baseline).abs() < 1e-6,
            "stage {stage}: {}",
            b.requests
        );
        assert!(
            (c.requests - candidate).abs() < 1e-6,
            "stage {stage}: {}",
            c.requests
        );
    }
}

#[test]
fn the_capacity_gate_refuses_the_step_to_a_stage_the_candidate_cannot_carry() {
    let plan = readme_plan();
    assert_eq!(
        plan.max_utilization,
        Some(0.85),
        "README keeps the default gate"
    );
    for rule in [Rule::PerInterval, Rule::Sequential { alpha: 0.05 }] {
        let mut rng = Rng(3);
        // Puma 1×2 of 32.5-ms requests carries 61.5/s: 70 % of 64/s is 73 % of it, 100 % 104 %.
        let cut = staged("2");
        let outcome = run(
            &plan,
            rule,
            &cut,
            &resample(&cut, &plan, 5, &mut rng).unwrap(),
        );
        assert_eq!(
            outcome.why,
            vec![CAPACITY.to_string()],
            "{rule:?}: {outcome:?}"
        );
        assert_eq!(
            outcome.stage, 1,
            "{rule:?}: refused on leaving stage 2 (70 %), not stage 1: {outcome:?}"
        );
        // Puma 1×4 carries all of it (52 %).
        let same = staged("4");
        let outcome = run(
            &plan,
            rule,
            &same,
            &resample(&same, &plan, 5, &mut rng).unwrap(),
        );
        assert_eq!(outcome.rolled_back_at, None, "{rule:?}: {outcome:?}");
    }
}
