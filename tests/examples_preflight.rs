//! README's first manifest and every example pass the operator's pre-flight series lookup on
//! a yabeda-rails app (its request series and cAdvisor's, no GVL counters), and a manifest
//! with `gvlWait` would not: the lookup's own decision (`judge`, `outcome`) over answers that
//! say which metric names exist. An example that says in its header that it needs the
//! concurrency-metrics gem (`# Needs: the concurrency-metrics gem`) passes with the gem's series
//! and is refused without them, naming the gem.

use std::path::PathBuf;

use concurrency_operator::analysis::preflight::{judge, outcome, plan, Found, Target};
use concurrency_operator::analysis::Preflight;
use concurrency_operator::api::ConcurrencyExperiment;

/// What a yabeda-rails app on Kubernetes exports, scraped for a while and serving: its
/// request series, and cAdvisor's (usage, and the container's spec as the kubelet writes it).
const YABEDA_APP: [&str; 8] = [
    "up",
    "rails_requests_total",
    "rails_request_duration_seconds_bucket",
    "rails_request_duration_seconds_count",
    "container_memory_working_set_bytes",
    "container_cpu_usage_seconds_total",
    "container_spec_cpu_shares",
    "container_spec_memory_limit_bytes",
];

/// The concurrency-metrics gem's series in a Rails app with ActiveRecord.
const GEM: [&str; 4] = [
    "ruby_running_seconds_total",
    "ruby_io_wait_seconds_total",
    "ruby_gvl_wait_seconds_total",
    "ruby_db_pool_wait_seconds_total",
];

const NEEDS_GEM: &str = "# Needs: the concurrency-metrics gem";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first ```yaml block after "## Your first experiment".
fn readme_manifest() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme.split("## Your first experiment").nth(1).unwrap();
    let block = section.split("```yaml\n").nth(1).unwrap();
    block.split("```").next().unwrap().to_string()
}

fn on_a_yabeda_app(yaml: &str) -> Preflight {
    on_an_app(yaml, &[])
}

fn on_an_app(yaml: &str, more: &[&str]) -> Preflight {
    let exp: ConcurrencyExperiment = serde_yaml::from_str(yaml).unwrap();
    let target = Target {
        namespace: "shop".into(),
        deployment: exp.spec.target_ref.name.clone(),
        container: exp.spec.container.clone().unwrap_or_else(|| "web".into()),
        windows: Default::default(),
    };
    let analysis = &exp.spec.analysis;
    let p = plan(analysis, &target).unwrap();
    let found: Found = p
        .queries()
        .into_iter()
        .map(|q| {
            let inner = q
                .split_once("_over_time(")
                .map(|(_, rest)| rest)
                .unwrap_or_default();
            let name = &inner[..inner.find('{').unwrap_or(0)];
            let has = YABEDA_APP.contains(&name) || more.contains(&name);
            (q, has)
        })
        .collect();
    outcome(&judge(&p, &found, analysis.metrics.preset))
}

#[test]
fn readme_and_examples_pass_the_pre_flight_on_a_yabeda_app() {
    let readme = readme_manifest();
    assert_eq!(on_a_yabeda_app(&readme), Preflight::Passed, "{readme}");
    let mut examples = 0;
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains(NEEDS_GEM) {
                assert_eq!(
                    on_an_app(&text, &GEM),
                    Preflight::Passed,
                    "{}",
                    path.display()
                );
                let Preflight::Missing(m) = on_a_yabeda_app(&text) else {
                    panic!("{} must be refused without the gem", path.display());
                };
                assert!(m.contains("concurrency-metrics gem"), "{m}");
            } else {
                assert_eq!(
                    on_a_yabeda_app(&text),
                    Preflight::Passed,
                    "{}",
                    path.display()
                );
            }
            examples += 1;
        }
    }
    assert!(examples >= 2);
    // The same manifest with gvlWait is refused on such an app, naming it.
    let with_gvl = readme.replace(
        "      - {metric: errorRate",
        "      - {metric: gvlWait, max: \"15%\"}\n      - {metric: errorRate",
    );
    let Preflight::Missing(m) = on_a_yabeda_app(&with_gvl) else {
        panic!("gvlWait on a yabeda app must be refused:\n{with_gvl}");
    };
    assert!(m.contains("ruby_gvl_wait_seconds_total"), "{m}");
}
