//! Server flags on the command line: every form read back and rewritten, and the forms that
//! are refused.

use crate::api::ServerConfig;
use crate::api::ServerKind;
use crate::workload::WorkloadError;

use k8s_openapi::api::core::v1::Container;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::workload::command::*;
use crate::workload::{read_baseline, render_server, runs_config, ConfigMaps};

fn words(list: &[&str]) -> Option<Vec<String>> {
    (!list.is_empty()).then(|| list.iter().map(|s| s.to_string()).collect())
}

/// The Puma container of the seeds without the env: the counts are on the command line only.
fn app(command: &[&str], args: &[&str]) -> Container {
    let mut c = container("app", &[("RAILS_ENV", "production")]);
    c.command = words(command);
    c.args = words(args);
    c
}

fn render(c: &Container, config: &ServerConfig) -> Result<Container, WorkloadError> {
    let mut out = c.clone();
    render_server(&mut out, config)?;
    Ok(out)
}

fn line(c: &Container) -> (Option<Vec<String>>, Option<Vec<String>>) {
    (c.command.clone(), c.args.clone())
}

/// (workers, threads, minThreads) as read back.
fn read(c: &Container) -> (Option<i32>, Option<i32>, Option<i32>) {
    let d = deployment("storefront", vec![c.clone()]);
    let b = read_baseline(&d, None, &ConfigMaps::new()).unwrap();
    (b.workers, b.threads, b.min_threads)
}

/// Each form of the seeds' `-w 2 -t 6:6`, with the same words rewritten for puma 3×4.
#[test]
fn every_flag_form_is_read_back_and_rewritten_in_place() {
    let cases: Vec<(Container, Container)> = vec![
        (
            app(&["bundle", "exec", "puma", "-w", "2", "-t", "6:6", "-C", "config/puma.rb"], &[]),
            app(&["bundle", "exec", "puma", "-w", "3", "-t", "4:4", "-C", "config/puma.rb"], &[]),
        ),
        (
            app(&["puma"], &["--workers", "2", "--threads", "6:6"]),
            app(&["puma"], &["--workers", "3", "--threads", "4:4"]),
        ),
        (
            app(&["bundle", "exec"], &["puma", "--workers=2", "--threads=6:6"]),
            app(&["bundle", "exec"], &["puma", "--workers=3", "--threads=4:4"]),
        ),
        (
            // `-t 6` is 6:6 to Puma; a single number stays a single number.
            app(&["bin/puma", "-w2", "-t", "6"], &[]),
            app(&["bin/puma", "-w3", "-t", "4"], &[]),
        ),
        (
            app(&["/usr/local/bundle/bin/puma", "-w", "2", "-t6:6"], &[]),
            app(&["/usr/local/bundle/bin/puma", "-w", "3", "-t4:4"], &[]),
        ),
        (
            // The image's entrypoint is Puma; the args are its flags.
            app(&[], &["-w", "2", "-t", "6:6", "--preload"]),
            app(&[], &["-w", "3", "-t", "4:4", "--preload"]),
        ),
        (
            app(&["sh", "-c", "bundle exec puma -w 2 -t 6:6 -C config/puma.rb"], &[]),
            app(&["sh", "-c", "bundle exec puma -w 3 -t 4:4 -C config/puma.rb"], &[]),
        ),
        (
            app(&["/bin/bash", "-lc"], &["exec bundle exec puma --workers=2 --threads 6:6"]),
            app(&["/bin/bash", "-lc"], &["exec bundle exec puma --workers=3 --threads 4:4"]),
        ),
        (
            // Quotes around a value are replaced with the bare number; nothing else moves.
            app(&["sh", "-c", "puma  -w \"2\"\t-t '6:6' # two by six"], &[]),
            app(&["sh", "-c", "puma  -w 3\t-t 4:4 # two by six"], &[]),
        ),
        (
            // Other commands of the script keep their own `-t`/`-w`.
            app(
                &["sh", "-c"],
                &["timeout -t 5 true && bundle exec rails db:migrate; exec bundle exec puma -w 2 -t 6:6 >>log/puma.log 2>&1 || tail -w 2"],
            ),
            app(
                &["sh", "-c"],
                &["timeout -t 5 true && bundle exec rails db:migrate; exec bundle exec puma -w 3 -t 4:4 >>log/puma.log 2>&1 || tail -w 2"],
            ),
        ),
        (
            // The kubelet expands `$(NAME)`; the literal is as good and needs no env.
            app(&["puma"], &["-w", "$(WEB_CONCURRENCY)", "-t", "$(MIN):$(MAX)"]),
            app(&["puma"], &["-w", "3", "-t", "4:4"]),
        ),
        (
            // Assignments in front of the server, and exported before it.
            app(&["sh", "-c", "export WEB_CONCURRENCY=2; RAILS_MAX_THREADS=6 PUMA_MIN_THREADS=6 exec bundle exec puma"], &[]),
            app(&["sh", "-c", "export WEB_CONCURRENCY=3; RAILS_MAX_THREADS=4 PUMA_MIN_THREADS=4 exec bundle exec puma"], &[]),
        ),
        (
            app(&["env", "WEB_CONCURRENCY=2", "puma", "-t", "6:6"], &[]),
            app(&["env", "WEB_CONCURRENCY=3", "puma", "-t", "4:4"], &[]),
        ),
    ];
    for (before, after) in cases {
        let expanded = before.args.iter().flatten().any(|a| a.contains("$("));
        if !expanded {
            assert_eq!(
                read(&before),
                (Some(2), Some(6), None),
                "{:?}",
                line(&before)
            );
        }
        let got = render(&before, &puma(3, 4)).unwrap();
        assert_eq!(line(&got), line(&after), "from {:?}", line(&before));
        assert_eq!(read(&got), (Some(3), Some(4), None), "{:?}", line(&got));
        assert_eq!(render(&got, &puma(3, 4)).unwrap(), got, "idempotent");
    }
}

#[test]
fn flag_values_from_the_env_are_read_through_the_kubelet_expansion() {
    let mut c = app(&["puma"], &["-w", "$(WEB_CONCURRENCY)", "-t", "6"]);
    c.env = Some(env(&[("WEB_CONCURRENCY", "2")]));
    assert_eq!(read(&c), (Some(2), Some(6), None));
}

#[test]
fn flags_override_the_env_in_the_read_back() {
    let mut c = app(&["bundle", "exec", "puma", "-w", "2", "-t", "1:6"], &[]);
    c.env = Some(env(&[
        ("WEB_CONCURRENCY", "8"),
        ("RAILS_MAX_THREADS", "16"),
    ]));
    assert_eq!(read(&c), (Some(2), Some(6), Some(1)));
}

#[test]
fn min_threads_follow_the_env_rendering() {
    let c = app(&["puma", "-t", "6:6", "-w", "2"], &[]);
    let with_min = ServerConfig {
        min_threads: Some(1),
        ..puma(2, 4)
    };
    assert_eq!(
        render(&c, &with_min).unwrap().command,
        words(&["puma", "-t", "1:4", "-w", "2"])
    );
    // Only the minimum asked for: the maximum stays the target's.
    let only_min = ServerConfig {
        server: ServerKind::Puma,
        min_threads: Some(2),
        ..ServerConfig::default()
    };
    assert_eq!(
        render(&c, &only_min).unwrap().command,
        words(&["puma", "-t", "2:6", "-w", "2"])
    );
    let single = app(&["puma", "-t", "6"], &[]);
    assert_eq!(
        render(&single, &with_min).unwrap().command,
        words(&["puma", "-t", "1:4"])
    );
}

#[test]
fn counts_the_candidate_leaves_out_keep_their_flags() {
    let c = app(&["puma", "-w", "2", "-t", "6:6"], &[]);
    let threads_only = ServerConfig {
        server: ServerKind::Puma,
        threads: Some(4),
        ..ServerConfig::default()
    };
    assert_eq!(
        render(&c, &threads_only).unwrap().command,
        words(&["puma", "-w", "2", "-t", "4:4"])
    );
    // An abbreviation is only refused when it would have to change.
    let abbreviated = app(&["puma", "--work", "2", "-t", "6:6"], &[]);
    assert_eq!(
        render(&abbreviated, &threads_only).unwrap().command,
        words(&["puma", "--work", "2", "-t", "4:4"])
    );
}

#[test]
fn falcon_count_is_rewritten_when_the_command_is_kept() {
    let c = app(
        &[
            "bundle",
            "exec",
            "falcon",
            "serve",
            "--count",
            "2",
            "--bind",
            "http://0.0.0.0:8080",
        ],
        &[],
    );
    let got = render(&c, &falcon(3, None)).unwrap();
    assert_eq!(
        got.command,
        words(&[
            "bundle",
            "exec",
            "falcon",
            "serve",
            "--count",
            "3",
            "--bind",
            "http://0.0.0.0:8080"
        ])
    );
    let script = app(&["sh", "-c", "WEB_CONCURRENCY=2 falcon host"], &[]);
    assert_eq!(
        render(&script, &falcon(4, None)).unwrap().command,
        words(&["sh", "-c", "WEB_CONCURRENCY=4 falcon host"])
    );
    // Falcon's `-n` is not assumed on a command line that does not start Falcon.
    let other = app(&["bin/start"], &["-n", "2"]);
    assert_eq!(
        line(&render(&other, &falcon(4, None)).unwrap()),
        line(&other)
    );
}

#[test]
fn forms_that_cannot_be_rewritten_are_refused_naming_them() {
    let refused = |c: Container, config: &ServerConfig| render(&c, config).unwrap_err();

    let e = refused(app(&["puma", "--work", "2"], &[]), &puma(3, 4));
    assert_eq!(e.category(), "UnrewritableFlags");
    assert_eq!(
        e.to_string(),
        "spec.candidate: container app of the target has `--work` in command[1], which would \
         override the candidate's workers: 3 but cannot be rewritten safely: --work is an \
         abbreviation of --workers; write --workers so it can be rewritten"
    );

    let e = refused(
        app(&["puma", "-C", "config/puma.rb", "-t"], &[]),
        &puma(3, 4),
    );
    assert_eq!(
        e.to_string(),
        "spec.candidate: container app of the target has `-t` in command[3], which would \
         override the candidate's threads: 4 but cannot be rewritten safely: -t has no value"
    );
    let e = refused(app(&["puma", "-w", "-t", "6"], &[]), &puma(3, 4));
    assert!(e.to_string().contains("-w has no value"), "{e}");

    let e = refused(
        app(&["sh", "-c", "bundle exec puma -w 2 -t \"6:6"], &[]),
        &puma(3, 4),
    );
    assert_eq!(
        e.to_string(),
        "spec.candidate: container app of the target starts the server from the shell string \
         in command[2], which cannot be read (unterminated double quote), so flags in it that \
         would override the candidate's config cannot be rewritten"
    );

    // The spec's own args contradicting its counts is the user's conflict.
    let config = ServerConfig {
        args: words(&["-w", "2"]),
        ..puma(3, 4)
    };
    let e = refused(app(&["bundle", "exec", "puma"], &[]), &config);
    assert_eq!(e.category(), "ContradictingFlags");
    assert_eq!(
        e.to_string(),
        "spec.candidate.args[0]: `-w 2` contradicts workers: 3 (the server's flag would win); \
         drop it or make it agree"
    );
    // Agreeing flags in the spec are fine.
    let agreeing = ServerConfig {
        args: words(&["-w", "3"]),
        ..puma(3, 4)
    };
    assert!(render(&app(&["bundle", "exec", "puma"], &[]), &agreeing).is_ok());
}

#[test]
fn runs_config_sees_a_promoted_command_line() {
    let c = app(&["sh", "-c", "bundle exec puma -w 2 -t 6:6"], &[]);
    let target = deployment("storefront", vec![c.clone()]);
    assert!(!runs_config(&target, &puma(3, 4), None));
    let promoted = deployment("storefront", vec![render(&c, &puma(3, 4)).unwrap()]);
    assert!(runs_config(&promoted, &puma(3, 4), None));
    // A target that cannot be rendered does not run the config.
    let broken = deployment("storefront", vec![app(&["puma", "--thr", "6"], &[])]);
    assert!(!runs_config(&broken, &puma(3, 4), None));
}

#[test]
fn the_read_back_says_what_it_could_not_see() {
    let d = deployment(
        "storefront",
        vec![app(&["sh", "-c", "puma -w $WORKERS -t 6"], &[])],
    );
    let b = read_baseline(&d, None, &ConfigMaps::new()).unwrap();
    assert_eq!((b.workers, b.threads), (None, Some(6)));
    assert_eq!(
        b.unresolved,
        ["workers: unknown (`-w $WORKERS` in command[2])"]
    );
    let d = deployment(
        "storefront",
        vec![app(&["sh", "-c", "puma -w 2 -t '6"], &[])],
    );
    let b = read_baseline(&d, None, &ConfigMaps::new()).unwrap();
    assert_eq!(
        b.unresolved,
        ["command[2]: the shell string cannot be read (unterminated single quote); flags in it are not seen"]
    );
}

#[test]
fn the_lexer_keeps_exact_byte_ranges() {
    let script = r#"a "b c" 'd'e\ f $(g "h)") `i j` ${k}; l>m"#;
    let toks = lex(script).unwrap();
    let words: Vec<(&str, &str)> = toks
        .iter()
        .filter_map(|t| match t {
            Tok::Word { text, start, end } => Some((text.as_str(), &script[*start..*end])),
            _ => None,
        })
        .collect();
    assert_eq!(
        words,
        [
            ("a", "a"),
            ("b c", "\"b c\""),
            ("de f", "'d'e\\ f"),
            ("$(g \"h)\")", "$(g \"h)\")"),
            ("`i j`", "`i j`"),
            ("${k}", "${k}"),
            ("l", "l"),
            ("m", "m"),
        ]
    );
    assert_eq!(toks.iter().filter(|t| **t == Tok::Sep).count(), 1);
    assert_eq!(toks.iter().filter(|t| **t == Tok::Redirect).count(), 1);
    for bad in ["'a", "\"a", "$(a", "`a", "${a"] {
        assert!(lex(bad).is_err(), "{bad}");
    }
}

#[test]
fn another_programs_flags_are_left_alone() {
    // A command of its own that is not a server: its `-t` is not Puma's.
    let worker = app(&["bin/worker"], &["-t", "30", "-w", "queue"]);
    assert_eq!(line(&render(&worker, &puma(3, 4)).unwrap()), line(&worker));
    assert_eq!(read(&worker), (None, None, None));
    // Nor a script that runs something else.
    let script = app(&["sh", "-c", "exec bin/worker -t 30"], &[]);
    assert_eq!(line(&render(&script, &puma(3, 4)).unwrap()), line(&script));
    // After `--`, Puma reads no more options.
    let rest = app(&["puma", "-w", "2", "--", "-t", "6"], &[]);
    assert_eq!(
        render(&rest, &puma(3, 4)).unwrap().command,
        words(&["puma", "-w", "3", "--", "-t", "6"])
    );
}

#[test]
fn several_server_commands_and_longer_numbers_keep_the_script_intact() {
    let c = app(
        &[
            "sh",
            "-c",
            "export WEB_CONCURRENCY=2; puma -w 2 -t 6:6 || exec bin/puma -t 6",
        ],
        &[],
    );
    let got = render(&c, &puma(12, 16)).unwrap();
    assert_eq!(
        got.command,
        words(&[
            "sh",
            "-c",
            "export WEB_CONCURRENCY=12; puma -w 12 -t 16:16 || exec bin/puma -t 16"
        ])
    );
    assert_eq!(
        render(&got, &puma(1, 1)).unwrap().command,
        words(&[
            "sh",
            "-c",
            "export WEB_CONCURRENCY=1; puma -w 1 -t 1:1 || exec bin/puma -t 1"
        ])
    );
}
