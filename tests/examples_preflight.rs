//! README's first manifest and every example pass the operator's pre-flight series lookup on
//! a yabeda-rails app (its request series and cAdvisor's, no GVL counters), and a manifest
//! with `gvlWait` would not: the lookup's own decision (`judge`, `outcome`) over answers that
//! say which metric names exist.

use std::path::PathBuf;

use concurrency_operator::analysis::preflight::{judge, outcome, plan, Found, Target};
use concurrency_operator::analysis::Preflight;
use concurrency_operator::api::ConcurrencyExperiment;

/// What a yabeda-rails app on Kubernetes exports, scraped for a while and serving.
const YABEDA_APP: [&str; 6] = [
    "up",
    "rails_requests_total",
    "rails_request_duration_seconds_bucket",
    "rails_request_duration_seconds_count",
    "container_memory_working_set_bytes",
    "container_cpu_usage_seconds_total",
];

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
            let has = YABEDA_APP.contains(&name);
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
            assert_eq!(
                on_a_yabeda_app(&text),
                Preflight::Passed,
                "{}",
                path.display()
            );
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
