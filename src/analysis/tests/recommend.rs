use crate::analysis::recommend::*;
use crate::api::RecommendationSpec;

#[test]
fn the_gvl_caps_throughput_above_amdahl() {
    let cap = gvl_throughput_ceiling(0.52);
    assert!((cap - 2.083).abs() < 0.001, "{cap}");
    assert!(amdahl_speedup(0.52, 64) < cap);
    assert!(recommendation_table(0.52, 0.05, 0.95).contains("2.08x"));
}

#[test]
fn reproduces_the_seed_table_and_recommends_4() {
    let p = 0.52;
    let rounded: Vec<String> = (2..=6)
        .map(|n| format!("{:.2}", amdahl_speedup(p, n)))
        .collect();
    assert_eq!(rounded, ["1.35", "1.53", "1.64", "1.71", "1.76"]);
    assert_eq!(recommended_threads(p, 0.05), 4);
    let rec = recommend(p, 0.05, 0.95).unwrap();
    assert_eq!(rec.threads, 4);
    assert!(!rec.async_server_advised);
    assert_eq!(rec.speedups.len(), 8);
    assert_eq!(rec.speedups[0], 1.0);
    assert_eq!(
        rec.message,
        "I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)"
    );
}

#[test]
fn the_table_prints_every_row() {
    let t = recommendation_table(0.52, 0.05, 0.95);
    for row in [
        "      2    1.35x         +35.1%",
        "      3    1.53x         +13.3%",
        "      4    1.64x          +7.1%  <- recommended",
        "      5    1.71x          +4.5%",
        "      6    1.76x          +3.1%",
    ] {
        assert!(t.contains(row), "missing {row:?} in\n{t}");
    }
    assert!(t.contains("below 5%)\n"), "{t}");
    assert!(recommendation_table(1.5, 0.05, 0.95).contains("not between 0 and 1"));
}

#[test]
fn edges_of_the_io_share() {
    // CPU-bound: threads gain nothing.
    assert_eq!(recommended_threads(0.0, 0.05), 1);
    // All I/O: n/(n−1) − 1 ≥ 5% up to n = 21.
    assert_eq!(recommended_threads(1.0, 0.05), 21);
    // A stricter minimum gain recommends fewer threads.
    assert!(recommended_threads(0.52, 0.10) < recommended_threads(0.52, 0.05));
    assert!(recommend(f64::NAN, 0.05, 0.95).is_none());
    assert!(recommend(-0.1, 0.05, 0.95).is_none());
}

#[test]
fn mostly_io_advises_an_async_server() {
    let rec = recommend(0.97, 0.05, 0.95).unwrap();
    assert!(rec.async_server_advised);
    assert!(rec.message.contains("Falcon"), "{}", rec.message);
    let spec = RecommendationSpec::default();
    let rec = recommend_from_spec(0.52, &spec).unwrap().unwrap();
    assert_eq!(rec.threads, 4);
    let bad = RecommendationSpec {
        min_gain: "5".into(),
        ..RecommendationSpec::default()
    };
    assert!(recommend_from_spec(0.52, &bad).is_err());
}

#[test]
fn falcon_comes_with_seed_004s_workers_per_core() {
    let spec = RecommendationSpec::default();
    // Seed 000's short DB queries are in Falcon's range already; a mostly-CPU app is not.
    let io_bound = recommend_from_spec(0.93, &spec).unwrap().unwrap();
    assert!(io_bound.async_server_advised);
    assert_eq!(io_bound.async_workers_per_core, Some(1));
    assert!(
        io_bound
            .message
            .contains("1 worker(s) per CPU core (I/O-bound; seed 004)"),
        "{}",
        io_bound.message
    );
    let mixed = recommend_from_spec(0.82, &spec).unwrap().unwrap();
    assert_eq!(mixed.async_workers_per_core, Some(2));
    assert!(mixed.message.contains("CPU mixed in"), "{}", mixed.message);
    let cpu = recommend_from_spec(0.6, &spec).unwrap().unwrap();
    assert!(!cpu.async_server_advised);
    assert_eq!(cpu.async_workers_per_core, None);
}
