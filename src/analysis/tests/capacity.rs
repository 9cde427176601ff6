use crate::analysis::capacity::*;
use crate::api::CapacityBound;
use crate::api::CapacitySource;
use crate::api::RenderedServer;
use crate::api::ServerConfig;
use crate::api::ServerKind;
use k8s_openapi::api::core::v1::ResourceRequirements;

/// The demo's app: 2 ms CPU + 60 ms I/O per request.
const DEMO: PerRequest = PerRequest {
    cpu: 0.002,
    io: 0.060,
    blocking: 0.0,
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn a_puma_worker_is_bound_by_its_threads_until_the_gvl_is_busy() {
    let (r, bound) = worker_capacity(ServerKind::Puma, Some(6), DEMO).unwrap();
    assert!(close(r, 6.0 / 0.062), "{r}");
    assert_eq!(bound, Bound::Threads);
    // 31 threads would serve 500/s; the GVL allows 1 / 2 ms = 500/s: GVL-bound from there.
    let (r, bound) = worker_capacity(ServerKind::Puma, Some(40), DEMO).unwrap();
    assert!(close(r, 500.0), "{r}");
    assert_eq!(bound, Bound::Gvl);
    // CPU-bound requests: one thread already keeps the GVL busy.
    let cpu_bound = PerRequest {
        cpu: 0.05,
        io: 0.0,
        blocking: 0.0,
    };
    let (r, bound) = worker_capacity(ServerKind::Puma, Some(1), cpu_bound).unwrap();
    assert!(close(r, 20.0), "{r}");
    assert_eq!(bound, Bound::Gvl);
}

#[test]
fn a_falcon_worker_is_bound_by_the_gvl_only() {
    let (r, bound) = worker_capacity(ServerKind::Falcon, None, DEMO).unwrap();
    assert!(close(r, 500.0), "{r}");
    assert_eq!(bound, Bound::Gvl);
    // Threads mean nothing to Falcon.
    assert_eq!(
        worker_capacity(ServerKind::Falcon, Some(3), DEMO),
        worker_capacity(ServerKind::Falcon, None, DEMO)
    );
}

#[test]
fn a_pod_is_workers_times_a_worker_capped_by_its_cpu_limit() {
    let c = pod_capacity(ServerKind::Puma, 2, Some(6), DEMO, None).unwrap();
    assert!(close(c.per_worker, 6.0 / 0.062));
    assert!(close(c.per_pod, 12.0 / 0.062), "{}", c.per_pod);
    assert_eq!(c.bound, Bound::Threads);
    // Half a core: 0.5 / 2 ms = 250/s, above 193.5/s — no cap.
    assert_eq!(
        pod_capacity(ServerKind::Puma, 2, Some(6), DEMO, Some(0.5)),
        Some(c)
    );
    // A tenth of a core: 50/s.
    let capped = pod_capacity(ServerKind::Puma, 2, Some(6), DEMO, Some(0.1)).unwrap();
    assert!(close(capped.per_pod, 50.0), "{}", capped.per_pod);
    assert_eq!(capped.bound, Bound::CpuLimit);
    assert!(close(capped.per_worker, c.per_worker));
    let falcon = pod_capacity(ServerKind::Falcon, 3, None, DEMO, Some(2.0)).unwrap();
    assert!(close(falcon.per_pod, 1000.0), "{}", falcon.per_pod);
    assert_eq!(falcon.bound, Bound::CpuLimit);
}

#[test]
fn no_estimate_from_unusable_inputs() {
    let zero_cpu = PerRequest {
        cpu: 0.0,
        io: 0.1,
        blocking: 0.0,
    };
    assert_eq!(worker_capacity(ServerKind::Puma, Some(4), zero_cpu), None);
    let nan = PerRequest {
        cpu: f64::NAN,
        io: 0.1,
        blocking: 0.0,
    };
    assert_eq!(worker_capacity(ServerKind::Falcon, None, nan), None);
    let negative_io = PerRequest {
        cpu: 0.01,
        io: -0.1,
        blocking: 0.0,
    };
    assert_eq!(
        worker_capacity(ServerKind::Puma, Some(4), negative_io),
        None
    );
    assert_eq!(worker_capacity(ServerKind::Puma, None, DEMO), None);
    assert_eq!(worker_capacity(ServerKind::Puma, Some(0), DEMO), None);
    assert_eq!(worker_capacity(ServerKind::Custom, Some(4), DEMO), None);
    assert_eq!(pod_capacity(ServerKind::Puma, 0, Some(4), DEMO, None), None);
    assert_eq!(
        pod_capacity(ServerKind::Puma, 2, Some(4), DEMO, Some(0.0)),
        None
    );
}

#[test]
fn headroom_is_the_unused_share() {
    assert!(close(headroom(20.0, 80.0).unwrap(), 0.75));
    assert!(close(headroom(100.0, 80.0).unwrap(), -0.25));
    assert_eq!(headroom(0.0, 80.0), Some(1.0));
    assert_eq!(headroom(20.0, 0.0), None);
    assert_eq!(headroom(f64::NAN, 80.0), None);
}

#[test]
fn cpu_quantities_in_cores() {
    assert_eq!(cpu_cores("2"), Some(2.0));
    assert_eq!(cpu_cores("1.5"), Some(1.5));
    assert_eq!(cpu_cores("500m"), Some(0.5));
    assert!((cpu_cores("250000u").unwrap() - 0.25).abs() < 1e-12);
    assert!((cpu_cores("100000000n").unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(cpu_cores("0"), None);
    assert_eq!(cpu_cores("lots"), None);
    assert_eq!(cpu_cores(""), None);
}

fn puma(workers: i32, threads: i32) -> RenderedServer {
    RenderedServer {
        server: ServerKind::Puma,
        workers: Some(workers),
        threads: Some(threads),
        ..Default::default()
    }
}

/// Issue 15's run: a 1-replica target of Puma 2×4 under 20 req/s (2 ms CPU + 60 ms I/O),
/// candidate Puma 1×1. Stage 2 (1 + 1 pods, 50%) carries 10 req/s on the candidate's pod,
/// which a 1×1 pod (≈ 16 req/s) can serve; stage 3 would put all 20 req/s on it.
#[test]
fn issue_15_a_one_by_one_candidate_cannot_carry_the_last_stage() {
    let one = puma(1, 1);
    let stage2 = predict(&one, DEMO, None, 20.0, 50, 1).unwrap();
    assert!(close(stage2.capacity.per_pod, 1.0 / 0.062), "{stage2:?}");
    assert_eq!(stage2.capacity.bound, Bound::Threads);
    assert!(close(stage2.load_per_pod, 10.0));
    assert!((stage2.utilization - 0.62).abs() < 1e-9, "{stage2:?}");
    let stage3 = predict(&one, DEMO, None, 20.0, 100, 1).unwrap();
    assert!(close(stage3.load_per_pod, 20.0));
    assert!((stage3.utilization - 1.24).abs() < 1e-9, "{stage3:?}");
    assert!(stage3.utilization > 0.85);
    // Puma 2×3: 2 × 3 / 62 ms ≈ 96.8 req/s per pod, 21% at the last stage.
    let bigger = predict(&puma(2, 3), DEMO, None, 20.0, 100, 1).unwrap();
    assert!(close(bigger.capacity.per_pod, 6.0 / 0.062), "{bigger:?}");
    assert!((bigger.utilization - 20.0 * 0.062 / 6.0).abs() < 1e-9);
    assert!(bigger.utilization < 0.85);
    // A CPU limit of 20m caps the same pod at 0.02 / 2 ms = 10 req/s: refused again.
    let capped = predict(&puma(2, 3), DEMO, Some(0.02), 20.0, 100, 1).unwrap();
    assert_eq!(capped.capacity.bound, Bound::CpuLimit);
    assert!((capped.utilization - 2.0).abs() < 1e-9, "{capped:?}");
}

#[test]
fn load_is_the_share_spread_over_the_pods() {
    assert!(close(load_per_pod(30.0, 67, 2).unwrap(), 10.05));
    assert_eq!(load_per_pod(30.0, 0, 2), Some(0.0));
    assert_eq!(load_per_pod(30.0, 50, 0), None);
    assert_eq!(load_per_pod(f64::NAN, 50, 1), None);
    assert_eq!(load_per_pod(-1.0, 50, 1), None);
    assert_eq!(load_per_pod(30.0, 101, 1), None);
}

#[test]
fn a_config_without_its_counts_has_no_capacity() {
    let mut c = puma(2, 4);
    c.threads = None;
    assert_eq!(config_capacity(&c, DEMO, None), None);
    let falcon = RenderedServer {
        server: ServerKind::Falcon,
        workers: None,
        ..Default::default()
    };
    assert_eq!(config_capacity(&falcon, DEMO, None), None);
    let falcon = RenderedServer {
        workers: Some(2),
        ..falcon
    };
    assert!(close(
        config_capacity(&falcon, DEMO, None).unwrap().per_pod,
        1000.0
    ));
    let negative = RenderedServer {
        workers: Some(-1),
        ..puma(2, 4)
    };
    assert_eq!(config_capacity(&negative, DEMO, None), None);
}

/// Times from the GVL counters.
fn exact(cpu: Option<f64>, io: Option<f64>) -> ChosenTimes {
    choose_times(GvlTimes { cpu, io }, None)
}

#[test]
fn a_variant_shows_what_was_measured_and_nothing_else() {
    let c = puma(2, 4);
    let v = variant_capacity(exact(Some(0.002), Some(0.06)), Some(20.0), Some(&c), None).unwrap();
    assert!(close(v.capacity_per_pod.unwrap(), 8.0 / 0.062));
    assert!(close(v.headroom.unwrap(), 1.0 - 20.0 * 0.062 / 8.0));
    assert_eq!(v.bound, Some(CapacityBound::Threads));
    assert_eq!(v.source, Some(CapacitySource::GvlCounters));
    // No rate: capacity without headroom.
    let v = variant_capacity(exact(Some(0.002), Some(0.06)), None, Some(&c), None).unwrap();
    assert!(v.capacity_per_pod.is_some() && v.headroom.is_none() && v.per_pod_rate.is_none());
    // NaN (0/0 without requests) is no data, not 0.
    let v = variant_capacity(exact(Some(f64::NAN), Some(0.06)), Some(3.0), Some(&c), None).unwrap();
    assert_eq!(
        (v.cpu_per_request, v.capacity_per_pod, v.per_pod_rate),
        (None, None, Some(3.0))
    );
    assert_eq!(
        variant_capacity(exact(None, None), None, Some(&c), None),
        None
    );
    assert_eq!(
        variant_capacity(exact(Some(f64::INFINITY), None), None, None, None),
        None
    );
    // A source without any time is not written.
    let only_source = ChosenTimes {
        source: Some(CapacitySource::StandardMetrics),
        ..ChosenTimes::default()
    };
    assert_eq!(variant_capacity(only_source, None, Some(&c), None), None);
}

#[test]
fn the_gvl_counters_win_when_they_give_both_times() {
    let standard = StandardTimes {
        cpu: Some(0.004),
        wall: Some(0.070),
    };
    let t = choose_times(
        GvlTimes {
            cpu: Some(0.002),
            io: Some(0.060),
        },
        Some(standard),
    );
    assert_eq!(
        t,
        ChosenTimes {
            cpu: Some(0.002),
            io: Some(0.060),
            source: Some(CapacitySource::GvlCounters),
            blocking: None,
        }
    );
}

#[test]
fn without_the_gvl_counters_the_standard_metrics_give_cpu_and_wall_minus_cpu() {
    let standard = StandardTimes {
        cpu: Some(0.004),
        wall: Some(0.070),
    };
    // No counters at all (no published gem writes them), or only one of the two, or NaN.
    for exact in [
        GvlTimes::default(),
        GvlTimes {
            cpu: Some(0.002),
            io: None,
        },
        GvlTimes {
            cpu: Some(f64::NAN),
            io: Some(0.06),
        },
    ] {
        let t = choose_times(exact, Some(standard));
        assert_eq!(t.source, Some(CapacitySource::StandardMetrics), "{exact:?}");
        assert!(close(t.cpu.unwrap(), 0.004));
        assert!(close(t.io.unwrap(), 0.066));
    }
    // The container's CPU above the wall time (other threads, GC): no negative I/O.
    let busy = StandardTimes {
        cpu: Some(0.09),
        wall: Some(0.07),
    };
    assert_eq!(busy.io(), Some(0.0));
    assert_eq!(busy.io_share(), Some(0.0));
    // CPU without a duration histogram: CPU only; the model then has no estimate.
    let cpu_only = StandardTimes {
        cpu: Some(0.004),
        wall: None,
    };
    let t = choose_times(GvlTimes::default(), Some(cpu_only));
    assert_eq!((t.cpu, t.io), (Some(0.004), None));
    assert_eq!(t.source, Some(CapacitySource::StandardMetrics));
    // Neither: what the counters had, said to be theirs; nothing at all is no source.
    let partial = GvlTimes {
        cpu: Some(0.002),
        io: None,
    };
    let t = choose_times(partial, Some(StandardTimes::default()));
    assert_eq!(
        (t.cpu, t.io, t.source),
        (Some(0.002), None, Some(CapacitySource::GvlCounters))
    );
    assert_eq!(
        choose_times(GvlTimes::default(), Some(StandardTimes::default())),
        ChosenTimes::default()
    );
}

#[test]
fn the_io_share_falls_back_to_wall_minus_cpu_over_wall() {
    let standard = StandardTimes {
        cpu: Some(0.024),
        wall: Some(0.050),
    };
    assert_eq!(
        choose_io_share(Some(0.52), Some(standard)),
        Some((0.52, CapacitySource::GvlCounters))
    );
    let (p, from) = choose_io_share(None, Some(standard)).unwrap();
    assert!(close(p, 0.52));
    assert_eq!(from, CapacitySource::StandardMetrics);
    // NaN from the counters (no requests) is no share.
    let (p, _) = choose_io_share(Some(f64::NAN), Some(standard)).unwrap();
    assert!(close(p, 0.52));
    // No wall time, or zero: nothing to divide by.
    for wall in [None, Some(0.0)] {
        let s = StandardTimes {
            cpu: Some(0.01),
            wall,
        };
        assert_eq!(choose_io_share(None, Some(s)), None);
    }
    assert_eq!(choose_io_share(None, None), None);
}

#[test]
fn the_candidate_keeps_the_baselines_counts_it_leaves_out() {
    let spec: ServerConfig =
        serde_json::from_value(serde_json::json!({"server": "puma", "threads": 3})).unwrap();
    let c = candidate_config(&spec, Some(&puma(2, 6)));
    assert_eq!((c.workers, c.threads), (Some(2), Some(3)));
    assert_eq!(candidate_config(&spec, None).workers, None);
    let falcon_base = RenderedServer {
        server: ServerKind::Falcon,
        workers: Some(4),
        ..Default::default()
    };
    let spec: ServerConfig =
        serde_json::from_value(serde_json::json!({"server": "puma", "workers": 1})).unwrap();
    let c = candidate_config(&spec, Some(&falcon_base));
    assert_eq!(
        (c.workers, c.threads),
        (Some(1), None),
        "no threads from a Falcon baseline"
    );
}

#[test]
fn cpu_limits_come_from_the_resources() {
    let r: ResourceRequirements =
        serde_json::from_value(serde_json::json!({"limits": {"cpu": "500m", "memory": "1Gi"}}))
            .unwrap();
    assert_eq!(cpu_limit(Some(&r)), Some(0.5));
    let r: ResourceRequirements =
        serde_json::from_value(serde_json::json!({"requests": {"cpu": "1"}})).unwrap();
    assert_eq!(cpu_limit(Some(&r)), None);
    assert_eq!(cpu_limit(None), None);
}

#[test]
fn a_stalled_event_loop_counts_as_cpu_for_falcon_not_for_puma() {
    let per = PerRequest {
        cpu: 0.002,
        io: 0.050,
        blocking: 0.048,
    };
    // Falcon: 2 ms of Ruby and 48 ms with the reactor stalled per request: 20 req/s per worker,
    // not the 500 the CPU alone would give.
    let (falcon, _) = worker_capacity(ServerKind::Falcon, None, per).unwrap();
    assert!((falcon - 20.0).abs() < 1e-9, "{falcon}");
    let (free, _) = worker_capacity(
        ServerKind::Falcon,
        None,
        PerRequest {
            blocking: 0.0,
            ..per
        },
    )
    .unwrap();
    assert!((free - 500.0).abs() < 1e-9, "{free}");
    // Puma's threads overlap the blocking call (it is in io): unchanged by it.
    let (puma, _) = worker_capacity(ServerKind::Puma, Some(4), per).unwrap();
    let (puma_free, _) = worker_capacity(
        ServerKind::Puma,
        Some(4),
        PerRequest {
            blocking: 0.0,
            ..per
        },
    )
    .unwrap();
    assert_eq!(puma, puma_free);
}
