//! Capacity: the request rate at which a pod saturates, from the CPU and I/O time per request.
//!
//! A Puma worker runs `t` threads but only one of them runs Ruby at a time (the GVL). Each
//! thread serves one request per `cpu + io` seconds, so `t` threads serve `t / (cpu + io)`
//! requests/s — until the GVL is busy all the time, at `1 / cpu`, however many threads wait on
//! I/O. A Falcon worker overlaps all I/O on fibers, so only the GVL bounds it: `1 / cpu`. A pod
//! runs `workers` of them, and a CPU limit of `c` cores caps the whole pod at `c / cpu`.
//! Headroom = 1 − observed per-pod rate / capacity (negative: above the estimate).

use crate::api::ServerKind;

/// CPU and I/O seconds per request, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerRequest {
    /// Time running Ruby (holding the GVL) per request, seconds.
    pub cpu: f64,
    /// Time waiting on I/O per request, seconds.
    pub io: f64,
}

/// What limits the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Every thread is busy: `threads / (cpu + io)` per worker.
    Threads,
    /// The GVL is busy all the time: `1 / cpu` per worker.
    Gvl,
    /// The container's CPU limit: `limit / cpu` per pod.
    CpuLimit,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Threads => "threads",
            Bound::Gvl => "GVL",
            Bound::CpuLimit => "CPU limit",
        }
    }
}

/// Saturation throughput, requests per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// One worker process, before the CPU limit.
    pub per_worker: f64,
    /// The pod: `workers × per_worker`, capped by the CPU limit.
    pub per_pod: f64,
    pub bound: Bound,
}

/// One worker's saturation rate and what bounds it. `None` when the inputs cannot give an
/// estimate: no CPU time (nothing to divide by), negative or non-finite times, a Puma worker
/// without a thread count, or a `custom` server (its concurrency is unknown).
pub fn worker_capacity(
    server: ServerKind,
    threads: Option<u32>,
    per_request: PerRequest,
) -> Option<(f64, Bound)> {
    let PerRequest { cpu, io } = per_request;
    if !(cpu.is_finite() && cpu > 0.0 && io.is_finite() && io >= 0.0) {
        return None;
    }
    let gvl = 1.0 / cpu;
    match server {
        ServerKind::Puma => {
            let t = f64::from(threads.filter(|t| *t >= 1)?);
            let by_threads = t / (cpu + io);
            // Ties go to the GVL: more threads would not help.
            Some(if by_threads < gvl {
                (by_threads, Bound::Threads)
            } else {
                (gvl, Bound::Gvl)
            })
        }
        ServerKind::Falcon => Some((gvl, Bound::Gvl)),
        ServerKind::Custom => None,
    }
}

/// The pod's saturation rate: `workers` workers, capped by `cpu_limit` cores when set.
pub fn pod_capacity(
    server: ServerKind,
    workers: u32,
    threads: Option<u32>,
    per_request: PerRequest,
    cpu_limit: Option<f64>,
) -> Option<Capacity> {
    if workers == 0 {
        return None;
    }
    let (per_worker, bound) = worker_capacity(server, threads, per_request)?;
    let uncapped = f64::from(workers) * per_worker;
    match cpu_limit {
        Some(cores) if !(cores.is_finite() && cores > 0.0) => None,
        Some(cores) if cores / per_request.cpu < uncapped => Some(Capacity {
            per_worker,
            per_pod: cores / per_request.cpu,
            bound: Bound::CpuLimit,
        }),
        _ => Some(Capacity {
            per_worker,
            per_pod: uncapped,
            bound,
        }),
    }
}

/// 1 − rate / capacity: the share of the capacity still unused at `rate` requests/s per pod.
pub fn headroom(rate: f64, capacity: f64) -> Option<f64> {
    (rate.is_finite() && rate >= 0.0 && capacity.is_finite() && capacity > 0.0)
        .then(|| 1.0 - rate / capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's app: 2 ms CPU + 60 ms I/O per request.
    const DEMO: PerRequest = PerRequest {
        cpu: 0.002,
        io: 0.060,
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
        let cpu_bound = PerRequest { cpu: 0.05, io: 0.0 };
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
        let zero_cpu = PerRequest { cpu: 0.0, io: 0.1 };
        assert_eq!(worker_capacity(ServerKind::Puma, Some(4), zero_cpu), None);
        let nan = PerRequest {
            cpu: f64::NAN,
            io: 0.1,
        };
        assert_eq!(worker_capacity(ServerKind::Falcon, None, nan), None);
        let negative_io = PerRequest {
            cpu: 0.01,
            io: -0.1,
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
}
