//! `concurrency-operator recommend` with the times per request: the Amdahl table, then the
//! capacity per thread count from the same model as the capacity gate.

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::kubectl::capacity::offline_report;

fn report(args: &[&str]) -> String {
    let cli = Cli::try_parse_from([&["concurrency-operator", "recommend"], args].concat()).unwrap();
    let Command::Recommend(r) = cli.command else {
        panic!("not recommend")
    };
    offline_report(&r)
}

#[test]
fn the_times_give_the_io_share_and_the_capacity_per_thread_count() {
    let out = report(&[
        "--cpu-per-request",
        "2ms",
        "--io-per-request",
        "60ms",
        "--workers",
        "2",
        "--threads",
        "6",
        "--rate",
        "30",
    ]);
    // io / (cpu + io) = 60 / 62.
    assert!(out.starts_with("I/O share p = 96.8%"), "{out}");
    assert!(out.contains("Capacity per pod at 2ms CPU + 60ms I/O per request, 2 workers:"));
    // 2 × 6 / 0.062 = 193.5 req/s; 30 req/s leaves 84 %.
    assert!(
        out.contains("puma    6        96.8 req/s   193.5 req/s   threads  84%       ← now"),
        "{out}"
    );
    assert!(
        out.contains("falcon  -        500.0 req/s  1000.0 req/s  GVL      97%"),
        "{out}"
    );
}

#[test]
fn a_cpu_limit_caps_every_row_and_the_ratio_alone_prints_no_capacity() {
    let out = report(&[
        "--cpu-per-request",
        "10ms",
        "--io-per-request",
        "10ms",
        "--cpu-limit",
        "500m",
    ]);
    // A worker saturates its GVL at 1 / 10 ms = 100 req/s; 0.5 core / 10 ms = 50 req/s per pod.
    assert!(out.contains(", CPU limit 0.5 cores:"), "{out}");
    assert!(
        out.contains("puma    8        100.0 req/s  50.0 req/s  CPU limit"),
        "{out}"
    );
    let ratio_only = report(&["--io-ratio", "50%"]);
    assert!(!ratio_only.contains("Capacity per pod"), "{ratio_only}");
}
