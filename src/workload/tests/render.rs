//! Rendering server configs into a container and reading them back.

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector};
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::api::{FalconMode, FalconOptions, RenderedServer, ServerConfig, ServerKind};
use crate::workload::*;

fn rendered(mut c: Container, config: &ServerConfig) -> Container {
    render_server(&mut c, config).unwrap();
    c
}

fn no_config_maps() -> ConfigMaps {
    ConfigMaps::new()
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
fn puma_to_falcon_drops_pumas_variables_keeps_the_pool_and_sets_the_command() {
    let host = rendered(puma_2x6(), &falcon(2, Some(FalconMode::Host)));
    // RAILS_MAX_THREADS stays: a default database.yml sizes the pool from it (seed 004's
    // ConnectionTimeoutError when it fell back to 5).
    assert_eq!(
        env_pairs(&host),
        pairs(&[
            ("RAILS_ENV", "production"),
            ("WEB_CONCURRENCY", "2"),
            ("RAILS_MAX_THREADS", "6")
        ])
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
            config: None,
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
            config: None,
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
            read_baseline(&d, None, &no_config_maps()).unwrap(),
            RenderedServer::from(&config)
        );
    }
    let with_min = ServerConfig {
        min_threads: Some(2),
        ..puma(2, 4)
    };
    let d = deployment("storefront", vec![rendered(puma_2x6(), &with_min)]);
    assert_eq!(
        read_baseline(&d, None, &no_config_maps())
            .unwrap()
            .min_threads,
        Some(2)
    );

    let d = deployment(
        "storefront",
        vec![rendered(puma_2x6(), &falcon(3, Some(FalconMode::Host)))],
    );
    assert_eq!(
        read_baseline(&d, None, &no_config_maps()).unwrap(),
        RenderedServer {
            server: ServerKind::Falcon,
            workers: Some(3),
            db_pool: Some(6),
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
    let b = read_baseline(&by_env, None, &no_config_maps()).unwrap();
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
    let b = read_baseline(&deployment("s", vec![flags]), None, &no_config_maps()).unwrap();
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
    let b = read_baseline(&deployment("s", vec![serve]), None, &no_config_maps()).unwrap();
    assert_eq!((b.server, b.workers), (ServerKind::Falcon, Some(4)));
}

#[test]
fn container_not_found_names_the_field_and_the_choices() {
    let err = read_baseline(&storefront(), Some("web"), &no_config_maps()).unwrap_err();
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
fn db_pool_sets_the_pool_variables_for_falcon_and_puma() {
    let config = ServerConfig {
        db_pool: Some(15),
        ..falcon(2, None)
    };
    let c = rendered(puma_2x6(), &config);
    assert_eq!(
        env_pairs(&c),
        pairs(&[
            ("RAILS_ENV", "production"),
            ("WEB_CONCURRENCY", "2"),
            ("RAILS_MAX_THREADS", "15"),
            ("DB_POOL", "15"),
        ])
    );
    // Puma: RAILS_MAX_THREADS is the thread count; the pool goes to DB_POOL only.
    let config = ServerConfig {
        db_pool: Some(10),
        ..puma(2, 4)
    };
    let c = rendered(puma_2x6(), &config);
    let env = env_pairs(&c);
    assert!(env.contains(&("RAILS_MAX_THREADS".into(), "4".into())));
    assert!(env.contains(&("DB_POOL".into(), "10".into())));
    let d = deployment("storefront", vec![c]);
    let read = read_baseline(&d, None, &no_config_maps()).unwrap();
    assert_eq!(read, RenderedServer::from(&config));
    assert_eq!(read.summary(), "puma 2×4, pool 10");
}

#[test]
fn the_pool_reads_back_from_db_pool_then_rails_max_threads() {
    // Puma with one connection per thread: nothing to say.
    let d = deployment("storefront", vec![puma_2x6()]);
    let read = read_baseline(&d, None, &no_config_maps()).unwrap();
    assert_eq!(read.db_pool, None);
    assert_eq!(read.summary(), "puma 2×6");
    let falcon = rendered(puma_2x6(), &falcon(2, Some(FalconMode::Host)));
    let d = deployment("storefront", vec![falcon]);
    let read = read_baseline(&d, None, &no_config_maps()).unwrap();
    assert_eq!(read.db_pool, Some(6));
    assert_eq!(read.summary(), "falcon 2 workers, pool 6");
}

#[test]
fn falcon_host_reads_the_config_file_it_is_given() {
    let config = ServerConfig {
        falcon: Some(FalconOptions {
            mode: FalconMode::Host,
            bind: None,
            config: Some("config/falcon.rb".into()),
        }),
        ..falcon(2, None)
    };
    let c = rendered(puma_2x6(), &config);
    assert_eq!(
        c.command,
        Some(vec![
            "falcon".into(),
            "host".into(),
            "config/falcon.rb".into()
        ])
    );
    // Read back, the command is the baseline's as it is.
    let d = deployment("storefront", vec![c]);
    let read = read_baseline(&d, None, &no_config_maps()).unwrap();
    assert_eq!(read.server, ServerKind::Falcon);
    assert_eq!(read.workers, Some(2));
}

#[test]
fn falcon_host_without_a_config_keeps_the_file_the_targets_falcon_host_reads() {
    // A Falcon target (falcon host config/falcon.rb) re-canaried with other workers.
    let mut target = puma_2x6();
    target.command = Some(vec!["bundle".into(), "exec".into(), "falcon".into()]);
    target.args = Some(vec!["host".into(), "config/falcon.rb".into()]);
    let c = rendered(target, &falcon(4, Some(FalconMode::Host)));
    assert_eq!(
        c.command,
        Some(vec![
            "falcon".into(),
            "host".into(),
            "config/falcon.rb".into()
        ])
    );
    // A target without one: Falcon's default (./falcon.rb).
    let c = rendered(puma_2x6(), &falcon(4, Some(FalconMode::Host)));
    assert_eq!(c.command, Some(vec!["falcon".into(), "host".into()]));
}
