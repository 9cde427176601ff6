//! Rendering, read-back and the candidate Deployment, against small fixtures.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use super::*;
use crate::api::{FalconMode, FalconOptions, RenderedServer, ServerConfig, ServerKind};
use crate::plan;

fn rendered(mut c: Container, config: &ServerConfig) -> Container {
    render_server(&mut c, config);
    c
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn memory(limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity(limit.to_string()),
        )])),
        ..ResourceRequirements::default()
    }
}

#[test]
fn puma_2x6_to_2x4_sets_exactly_the_four_variables() {
    let c = rendered(puma_2x6(), &puma(2, 4));
    assert_eq!(
        env_pairs(&c),
        pairs(&[
            ("RAILS_ENV", "production"),
            ("WEB_CONCURRENCY", "2"),
            ("RAILS_MAX_THREADS", "4"),
            ("PUMA_MAX_THREADS", "4"),
            ("PUMA_MIN_THREADS", "4"),
        ])
    );
    assert_eq!(
        rendered(c.clone(), &puma(2, 4)),
        c,
        "rendering is idempotent"
    );
}

#[test]
fn puma_on_a_bare_container_appends_and_honours_min_threads() {
    let config = ServerConfig {
        min_threads: Some(1),
        ..puma(3, 5)
    };
    let c = rendered(container("app", &[]), &config);
    assert_eq!(
        env_pairs(&c),
        pairs(&[
            ("WEB_CONCURRENCY", "3"),
            ("RAILS_MAX_THREADS", "5"),
            ("PUMA_MAX_THREADS", "5"),
            ("PUMA_MIN_THREADS", "1"),
        ])
    );
}

#[test]
fn duplicate_variables_collapse_to_the_first_position() {
    let c = container(
        "app",
        &[
            ("RAILS_MAX_THREADS", "6"),
            ("A", "1"),
            ("RAILS_MAX_THREADS", "8"),
        ],
    );
    let c = rendered(c, &puma(2, 4));
    let names: Vec<String> = env_pairs(&c).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "RAILS_MAX_THREADS",
            "A",
            "WEB_CONCURRENCY",
            "PUMA_MAX_THREADS",
            "PUMA_MIN_THREADS"
        ]
    );
    assert_eq!(env_pairs(&c)[0].1, "4");
}

#[test]
fn puma_to_falcon_drops_thread_variables_and_sets_the_command() {
    let host = rendered(puma_2x6(), &falcon(2, Some(FalconMode::Host)));
    assert_eq!(
        env_pairs(&host),
        pairs(&[("RAILS_ENV", "production"), ("WEB_CONCURRENCY", "2")])
    );
    assert_eq!(host.command, Some(vec!["falcon".into(), "host".into()]));
    assert_eq!(host.args, None);

    let serve = rendered(puma_2x6(), &falcon(4, Some(FalconMode::Serve)));
    assert_eq!(
        serve.command.unwrap(),
        [
            "falcon",
            "serve",
            "--count",
            "4",
            "--bind",
            "http://0.0.0.0:8080"
        ]
    );

    let mut no_ports = puma_2x6();
    no_ports.ports = None;
    let bound = ServerConfig {
        falcon: Some(FalconOptions {
            mode: FalconMode::Serve,
            bind: Some("http://[::]:9292".into()),
        }),
        ..falcon(1, None)
    };
    assert_eq!(
        rendered(no_ports.clone(), &bound).command.unwrap(),
        [
            "falcon",
            "serve",
            "--count",
            "1",
            "--bind",
            "http://[::]:9292"
        ]
    );
    let default_port = ServerConfig {
        falcon: Some(FalconOptions {
            mode: FalconMode::Serve,
            bind: None,
        }),
        ..falcon(1, None)
    };
    assert_eq!(
        rendered(no_ports, &default_port)
            .command
            .unwrap()
            .last()
            .unwrap(),
        "http://0.0.0.0:3000"
    );
}

#[test]
fn switching_server_drops_a_command_that_starts_the_other_one() {
    let mut c = puma_2x6();
    c.command = Some(vec!["bundle".into(), "exec".into()]);
    c.args = Some(vec!["puma".into(), "-C".into(), "config/puma.rb".into()]);
    let to_falcon = rendered(c.clone(), &falcon(2, None));
    assert_eq!((to_falcon.command, to_falcon.args), (None, None));
    let back = rendered(
        rendered(c.clone(), &falcon(2, Some(FalconMode::Host))),
        &puma(2, 4),
    );
    assert_eq!((back.command, back.args), (None, None));
    let kept = rendered(c.clone(), &puma(2, 4));
    assert_eq!((kept.command, kept.args), (c.command, c.args));
}

#[test]
fn server_variable_follows_the_server_only_when_the_image_uses_it() {
    let c = container("app", &[("SERVER", "puma"), ("WEB_CONCURRENCY", "2")]);
    let c = rendered(c, &falcon(2, None));
    assert_eq!(
        env_pairs(&c),
        pairs(&[("SERVER", "falcon"), ("WEB_CONCURRENCY", "2")])
    );
    let plain = rendered(container("app", &[]), &falcon(2, None));
    assert!(env_pairs(&plain).iter().all(|(n, _)| n != "SERVER"));
}

#[test]
fn custom_is_verbatim_and_touches_nothing_else() {
    let config = ServerConfig {
        server: ServerKind::Custom,
        env: env(&[("UNICORN_WORKERS", "3")]),
        command: Some(vec!["unicorn".into()]),
        args: Some(vec!["-c".into(), "config/unicorn.rb".into()]),
        ..ServerConfig::default()
    };
    let c = rendered(puma_2x6(), &config);
    let mut expected = env_pairs(&puma_2x6());
    expected.push(("UNICORN_WORKERS".into(), "3".into()));
    assert_eq!(env_pairs(&c), expected);
    assert_eq!(c.command, config.command);
    assert_eq!(c.args, config.args);
}

#[test]
fn extra_env_overrides_rendered_variables_by_name() {
    let from_field = EnvVar {
        name: "POD_NAME".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
    };
    let mut extra = env(&[("RAILS_MAX_THREADS", "8"), ("RAILS_ENV", "staging")]);
    extra.push(from_field.clone());
    let config = ServerConfig {
        env: extra,
        ..puma(2, 4)
    };
    let c = rendered(puma_2x6(), &config);
    assert_eq!(
        env_pairs(&c),
        pairs(&[
            ("RAILS_ENV", "staging"),
            ("WEB_CONCURRENCY", "2"),
            ("RAILS_MAX_THREADS", "8"),
            ("PUMA_MAX_THREADS", "4"),
            ("PUMA_MIN_THREADS", "4"),
            ("POD_NAME", ""),
        ])
    );
    assert_eq!(c.env.unwrap().last(), Some(&from_field));
}

#[test]
fn resources_are_replaced_only_when_given() {
    let mut c = puma_2x6();
    c.resources = Some(memory("512Mi"));
    assert_eq!(
        rendered(c.clone(), &puma(2, 4)).resources,
        Some(memory("512Mi"))
    );
    let config = ServerConfig {
        resources: Some(memory("1Gi")),
        ..puma(4, 4)
    };
    assert_eq!(rendered(c, &config).resources, Some(memory("1Gi")));
}

#[test]
fn baseline_reads_back_what_was_rendered() {
    for config in [puma(2, 4), puma(1, 16)] {
        let d = deployment("storefront", vec![rendered(puma_2x6(), &config)]);
        assert_eq!(
            read_baseline(&d, None).unwrap(),
            RenderedServer::from(&config)
        );
    }
    let with_min = ServerConfig {
        min_threads: Some(2),
        ..puma(2, 4)
    };
    let d = deployment("storefront", vec![rendered(puma_2x6(), &with_min)]);
    assert_eq!(read_baseline(&d, None).unwrap().min_threads, Some(2));

    let d = deployment(
        "storefront",
        vec![rendered(puma_2x6(), &falcon(3, Some(FalconMode::Host)))],
    );
    assert_eq!(
        read_baseline(&d, None).unwrap(),
        RenderedServer {
            server: ServerKind::Falcon,
            workers: Some(3),
            command: Some(vec!["falcon".into(), "host".into()]),
            ..RenderedServer::default()
        }
    );
}

#[test]
fn baseline_falls_back_to_the_server_variable_and_the_command_line() {
    let by_env = deployment(
        "s",
        vec![container(
            "app",
            &[("SERVER", "Falcon"), ("WEB_CONCURRENCY", "2")],
        )],
    );
    let b = read_baseline(&by_env, None).unwrap();
    assert_eq!(
        (b.server, b.workers, b.threads),
        (ServerKind::Falcon, Some(2), None)
    );

    let mut flags = container("app", &[]);
    flags.command = Some(
        ["bundle", "exec", "puma", "-w", "3", "--threads=2:5"]
            .map(String::from)
            .to_vec(),
    );
    let b = read_baseline(&deployment("s", vec![flags]), None).unwrap();
    assert_eq!(
        (b.server, b.workers, b.threads, b.min_threads),
        (ServerKind::Puma, Some(3), Some(5), Some(2))
    );

    let mut serve = container("app", &[]);
    serve.args = Some(
        ["falcon", "serve", "--count", "4"]
            .map(String::from)
            .to_vec(),
    );
    let b = read_baseline(&deployment("s", vec![serve]), None).unwrap();
    assert_eq!((b.server, b.workers), (ServerKind::Falcon, Some(4)));
}

#[test]
fn container_not_found_names_the_field_and_the_choices() {
    let err = read_baseline(&storefront(), Some("web")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.container: container \"web\" not found in Deployment storefront (containers: app, sidecar)"
    );
    assert_eq!(err.category(), "ContainerNotFound");
    assert_eq!(app_container_index(&storefront(), Some("sidecar")), Ok(1));
    let empty = deployment("storefront", vec![]);
    assert_eq!(
        app_container_index(&empty, None).unwrap_err().category(),
        "NoContainers"
    );
}

#[test]
fn candidate_deployment_joins_the_target_selector_with_its_own_labels() {
    let exp = experiment("sf-threads", &puma(2, 4), None);
    let mut target = storefront();
    let template = &mut target.spec.as_mut().unwrap().template;
    template
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert("pod-template-hash".into(), "abc".into());
    let c = candidate_deployment(&target, &exp, 2).unwrap();

    assert_eq!(c.metadata.name.as_deref(), Some("storefront-candidate"));
    assert_eq!(c.metadata.namespace.as_deref(), Some(NAMESPACE));
    let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.api_version.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        (
            "ConcurrencyExperiment",
            "concurrency.dev/v1alpha1",
            "sf-threads",
            "0b5e-uid"
        )
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );

    let spec = c.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let selector = BTreeMap::from([
        ("app".to_string(), "storefront".to_string()),
        (
            "concurrency.dev/experiment".to_string(),
            "sf-threads".to_string(),
        ),
        (
            "concurrency.dev/variant".to_string(),
            "candidate".to_string(),
        ),
    ]);
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&selector));
    let meta = spec.template.metadata.as_ref().unwrap();
    let mut pod_labels = selector.clone();
    pod_labels.insert("tier".into(), "frontend".into());
    assert_eq!(meta.labels.as_ref(), Some(&pod_labels));
    assert_eq!(
        meta.annotations.as_ref().unwrap()["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(spec.strategy, storefront().spec.unwrap().strategy);

    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(
        pod.volumes,
        storefront().spec.unwrap().template.spec.unwrap().volumes
    );
    assert_eq!(
        env_pairs(&pod.containers[0])[2],
        ("RAILS_MAX_THREADS".into(), "4".into())
    );
    assert_eq!(pod.containers[1], container("sidecar", &[]));
    assert_eq!(c.labels()["team"], "web");
}

#[test]
fn candidate_renders_the_named_container() {
    let exp = experiment("e", &puma(1, 2), Some("sidecar"));
    let c = candidate_deployment(&storefront(), &exp, 1).unwrap();
    let pod = c.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0], puma_2x6());
    assert_eq!(
        env_pairs(&pod.containers[1])[0],
        ("WEB_CONCURRENCY".into(), "1".into())
    );
}

#[test]
fn unsupported_targets_are_refused_with_the_reason() {
    let exp = experiment("e", &puma(2, 4), None);
    let mut only_expressions: Deployment = storefront();
    let selector = &mut only_expressions.spec.as_mut().unwrap().selector;
    selector.match_labels = None;
    selector.match_expressions = Some(vec![serde_json::from_value(serde_json::json!(
        {"key": "app", "operator": "In", "values": ["storefront"]}
    ))
    .unwrap()]);
    let err = candidate_deployment(&only_expressions, &exp, 1).unwrap_err();
    assert_eq!(err.category(), "UnsupportedSelector");
    assert!(err.to_string().contains("matchExpressions"), "{err}");

    let mut no_uid = exp.clone();
    no_uid.metadata.uid = None;
    let err = candidate_deployment(&storefront(), &no_uid, 1).unwrap_err();
    assert!(err.to_string().contains("metadata.uid"), "{err}");
    let missing = experiment("e", &puma(2, 4), Some("web"));
    assert_eq!(
        candidate_deployment(&storefront(), &missing, 1)
            .unwrap_err()
            .category(),
        "ContainerNotFound"
    );
}

#[test]
fn a_promoted_target_runs_the_config_even_after_the_api_server_rewrites_quantities() {
    let config = ServerConfig {
        resources: Some(memory("1024Mi")),
        ..puma(2, 4)
    };
    let mut target = storefront();
    assert!(!runs_config(&target, &config, None));
    let template = promoted_template(&target, &config, None).unwrap();
    assert_eq!(
        template.metadata,
        storefront().spec.unwrap().template.metadata,
        "labels untouched"
    );
    target.spec.as_mut().unwrap().template = template;
    assert!(runs_config(&target, &config, None));
    target
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .resources = Some(memory("1Gi"));
    assert!(runs_config(&target, &config, None));
    assert!(!runs_config(&target, &puma(2, 5), None));
    assert!(!runs_config(&target, &config, Some("web")));
}

fn with_status(generation: i64, status: DeploymentStatus) -> Deployment {
    let mut d = storefront();
    d.metadata.generation = Some(generation);
    d.status = Some(status);
    d
}

fn settled(replicas: i32) -> DeploymentStatus {
    DeploymentStatus {
        observed_generation: Some(3),
        replicas: Some(replicas),
        updated_replicas: Some(replicas),
        available_replicas: Some(replicas),
        ready_replicas: Some(replicas),
        ..DeploymentStatus::default()
    }
}

#[test]
fn rollout_state_waits_like_kubectl_rollout_status() {
    let done = rollout_state(&with_status(3, settled(6)));
    assert_eq!(
        done,
        plan::DeploymentState {
            replicas: 6,
            ready_replicas: 6,
            rolled_out: true
        }
    );
    assert!(
        !rollout_state(&with_status(4, settled(6))).rolled_out,
        "new generation not observed"
    );
    let old_pods_left = DeploymentStatus {
        replicas: Some(7),
        ..settled(6)
    };
    assert!(!rollout_state(&with_status(3, old_pods_left)).rolled_out);
    let unavailable = DeploymentStatus {
        available_replicas: Some(5),
        ready_replicas: Some(5),
        ..settled(6)
    };
    let s = rollout_state(&with_status(3, unavailable));
    assert_eq!((s.ready_replicas, s.rolled_out), (5, false));
    assert!(!rollout_state(&storefront()).rolled_out, "no status yet");
}

#[test]
fn variant_status_summarises_the_deployment() {
    let d = with_status(
        3,
        DeploymentStatus {
            ready_replicas: Some(4),
            ..settled(6)
        },
    );
    let s = variant_status(&d, RenderedServer::from(&puma(2, 6)));
    assert_eq!(
        (s.deployment.as_str(), s.replicas, s.ready_replicas),
        ("storefront", 6, 4)
    );
    assert_eq!(s.summary, "puma 2×6");
    assert_eq!(
        s.pods.as_deref(),
        Some("^storefront-[a-z0-9]{1,10}-[a-z0-9]{5}$")
    );
}
