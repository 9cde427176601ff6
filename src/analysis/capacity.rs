//! Capacity: the request rate at which a pod saturates, from the CPU and I/O time per request.
//!
//! A Puma worker runs `t` threads but only one of them runs Ruby at a time (the GVL). Each
//! thread serves one request per `cpu + io` seconds, so `t` threads serve `t / (cpu + io)`
//! requests/s — until the GVL is busy all the time, at `1 / cpu`, however many threads wait on
//! I/O. A Falcon worker overlaps all I/O on fibers, so only the GVL bounds it: `1 / cpu`. A pod
//! runs `workers` of them, and a CPU limit of `c` cores caps the whole pod at `c / cpu`.
//! Headroom = 1 − observed per-pod rate / capacity (negative: above the estimate).
//!
//! The capacity gate predicts a step from these: the next stage's share of the measured total
//! rate, spread over the candidate pods it will have, over the candidate's capacity per pod.

use k8s_openapi::api::core::v1::ResourceRequirements;

use crate::api::{
    parse_quantity, CapacityBound, CapacitySource, RenderedServer, ServerConfig, ServerKind,
    VariantCapacity,
};

/// CPU and I/O seconds per request, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerRequest {
    /// Time running Ruby (holding the GVL) per request, seconds.
    pub cpu: f64,
    /// Time waiting on I/O per request, seconds.
    pub io: f64,
    /// Time an async worker's event loop was stalled per request (its lag probe): a call that
    /// blocks without yielding runs no other fiber, so for Falcon it counts as CPU. Puma's
    /// threads overlap it (it is in `io`, or in `cpu` if it keeps the GVL). 0 when unknown.
    pub blocking: f64,
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

impl From<Bound> for CapacityBound {
    fn from(b: Bound) -> Self {
        match b {
            Bound::Threads => CapacityBound::Threads,
            Bound::Gvl => CapacityBound::Gvl,
            Bound::CpuLimit => CapacityBound::CpuLimit,
        }
    }
}

impl From<CapacityBound> for Bound {
    fn from(b: CapacityBound) -> Self {
        match b {
            CapacityBound::Threads => Bound::Threads,
            CapacityBound::Gvl => Bound::Gvl,
            CapacityBound::CpuLimit => Bound::CpuLimit,
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
    let PerRequest { cpu, io, blocking } = per_request;
    if !(cpu.is_finite() && cpu > 0.0 && io.is_finite() && io >= 0.0) {
        return None;
    }
    let gvl = 1.0 / cpu;
    let blocking = if blocking.is_finite() {
        blocking.max(0.0)
    } else {
        0.0
    };
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
        ServerKind::Falcon => Some((1.0 / (cpu + blocking), Bound::Gvl)),
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

/// The pod capacity of a server config as rendered (or read back). `None` when a count it
/// needs is unknown (no workers; Puma without threads) or the server is `custom`.
pub fn config_capacity(
    config: &RenderedServer,
    per_request: PerRequest,
    cpu_limit: Option<f64>,
) -> Option<Capacity> {
    let count = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok());
    let threads = match config.server {
        ServerKind::Puma => Some(count(config.threads)?),
        _ => None,
    };
    pod_capacity(
        config.server,
        count(config.workers)?,
        threads,
        per_request,
        cpu_limit,
    )
}

/// The config the candidate's pods run, as far as the estimate needs it: the spec's counts,
/// and the baseline's for a count the spec leaves out (rendering keeps the target's there).
pub fn candidate_config(spec: &ServerConfig, baseline: Option<&RenderedServer>) -> RenderedServer {
    let mut c = RenderedServer::from(spec);
    c.workers = c.workers.or(baseline.and_then(|b| b.workers));
    if c.server == ServerKind::Puma {
        let puma = baseline.filter(|b| b.server == ServerKind::Puma);
        c.threads = c.threads.or(puma.and_then(|b| b.threads));
    }
    c
}

/// A measured time per request as the capacity model can use it: finite and not negative.
fn usable(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
}

/// CPU and I/O seconds per request from the GVL counters (`runningSeconds`, `ioWaitSeconds`
/// over the request counter): exact, where the app has them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GvlTimes {
    pub cpu: Option<f64>,
    pub io: Option<f64>,
}

impl GvlTimes {
    /// Both times usable: the standard metrics are not needed.
    pub fn complete(&self) -> bool {
        usable(self.cpu).is_some() && usable(self.io).is_some()
    }
}

/// What every Rails app on Kubernetes has: the container's CPU seconds (cAdvisor) per request
/// and the wall time per request (request-duration `_sum / _count`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StandardTimes {
    pub cpu: Option<f64>,
    pub wall: Option<f64>,
}

impl StandardTimes {
    /// I/O and waiting per request = wall − CPU, clamped at 0 (the container's CPU can pass
    /// the wall time: other threads, GC, the server's own work run beside the requests).
    pub fn io(&self) -> Option<f64> {
        let (cpu, wall) = (usable(self.cpu)?, usable(self.wall)?);
        Some((wall - cpu).max(0.0))
    }

    /// The I/O share p = (wall − CPU) / wall; none without wall time.
    pub fn io_share(&self) -> Option<f64> {
        let wall = usable(self.wall).filter(|w| *w > 0.0)?;
        Some(self.io()? / wall)
    }
}

/// The times the capacity model uses for one variant, and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ChosenTimes {
    pub cpu: Option<f64>,
    pub io: Option<f64>,
    pub source: Option<CapacitySource>,
    /// Async servers' stalled event loop per request, when their lag probe reports it.
    pub blocking: Option<f64>,
}

/// The GVL counters when they give both times; else the standard metrics (`standard`: `None`
/// when they were not asked for); else whatever the counters gave. Never a mix of the two:
/// the counters' CPU is the request's own, the container's is everything it runs.
pub fn choose_times(exact: GvlTimes, standard: Option<StandardTimes>) -> ChosenTimes {
    let (cpu, io) = (usable(exact.cpu), usable(exact.io));
    if exact.complete() {
        return ChosenTimes {
            cpu,
            io,
            source: Some(CapacitySource::GvlCounters),
            blocking: None,
        };
    }
    if let Some(st) = standard {
        let st_cpu = usable(st.cpu);
        let st_io = st.io();
        if st_cpu.is_some() || st_io.is_some() {
            return ChosenTimes {
                cpu: st_cpu,
                io: st_io,
                source: Some(CapacitySource::StandardMetrics),
                blocking: None,
            };
        }
    }
    ChosenTimes {
        cpu,
        io,
        source: (cpu.is_some() || io.is_some()).then_some(CapacitySource::GvlCounters),
        blocking: None,
    }
}

/// The I/O share for the recommendation: the counters' `io / (running + io + gvlWait)` when
/// it is a share, else the standard metrics' (wall − CPU) / wall.
pub fn choose_io_share(
    exact: Option<f64>,
    standard: Option<StandardTimes>,
) -> Option<(f64, CapacitySource)> {
    let share = |p: f64| p.is_finite() && (0.0..=1.0).contains(&p);
    match exact.filter(|p| share(*p)) {
        Some(p) => Some((p, CapacitySource::GvlCounters)),
        None => standard
            .and_then(|s| s.io_share())
            .filter(|p| share(*p))
            .map(|p| (p, CapacitySource::StandardMetrics)),
    }
}

/// One variant's measurement for status: the chosen times and busiest-pod rate (absent when
/// Prometheus had none), and the capacity and headroom they give with `config`.
pub fn variant_capacity(
    times: ChosenTimes,
    per_pod_rate: Option<f64>,
    config: Option<&RenderedServer>,
    cpu_limit: Option<f64>,
) -> Option<VariantCapacity> {
    let (cpu, io, rate) = (usable(times.cpu), usable(times.io), usable(per_pod_rate));
    let blocking = usable(times.blocking);
    let capacity = match (cpu, io, config) {
        (Some(cpu), Some(io), Some(config)) => {
            let blocking = blocking.unwrap_or(0.0);
            config_capacity(config, PerRequest { cpu, io, blocking }, cpu_limit)
        }
        _ => None,
    };
    VariantCapacity {
        cpu_per_request: cpu,
        io_per_request: io,
        blocking_per_request: blocking,
        source: times.source.filter(|_| cpu.is_some() || io.is_some()),
        per_pod_rate: rate,
        capacity_per_pod: capacity.map(|c| c.per_pod),
        headroom: capacity.zip(rate).and_then(|(c, r)| headroom(r, c.per_pod)),
        bound: capacity.map(|c| c.bound.into()),
    }
    .non_empty()
}

/// Requests per second each of `pods` pods serves when they get `share` percent of
/// `total_rate` (the router spreads a variant's share evenly over its ready pods).
pub fn load_per_pod(total_rate: f64, share: i32, pods: i32) -> Option<f64> {
    (total_rate.is_finite() && total_rate >= 0.0 && pods > 0 && (0..=100).contains(&share))
        .then(|| total_rate * f64::from(share) / 100.0 / f64::from(pods))
}

/// A weight step, predicted: the per-pod load it gives and the capacity that meets it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// Requests per second per pod at the new share.
    pub load_per_pod: f64,
    pub capacity: Capacity,
    /// load / capacity: 1.0 is saturated.
    pub utilization: f64,
}

/// Predicts `share` percent of `total_rate` on `pods` pods of `config`, whose requests take
/// `per_request`. `None` when the load or the capacity cannot be estimated.
pub fn predict(
    config: &RenderedServer,
    per_request: PerRequest,
    cpu_limit: Option<f64>,
    total_rate: f64,
    share: i32,
    pods: i32,
) -> Option<Prediction> {
    let load = load_per_pod(total_rate, share, pods)?;
    let capacity = config_capacity(config, per_request, cpu_limit)?;
    Some(Prediction {
        load_per_pod: load,
        capacity,
        utilization: load / capacity.per_pod,
    })
}

/// A CPU quantity in cores (`2`, `1.5`, `500m`, `250000u`, `100000000n`); none unless it is
/// a positive number.
pub fn cpu_cores(q: &str) -> Option<f64> {
    parse_quantity(q).filter(|v| v.is_finite() && *v > 0.0)
}

/// The CPU limit of a container's resources, cores.
pub fn cpu_limit(resources: Option<&ResourceRequirements>) -> Option<f64> {
    resources
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("cpu"))
        .and_then(|q| cpu_cores(&q.0))
}
