//! Prometheus metrics with the Ruby reference app's names (yabeda-rails histogram and
//! counter, the GVL instrumentation counters) and the operator's defaults.
//!
//! All workers of one gvl-sim process record into the same atomics, so one scrape of any
//! worker's port returns the sum over all workers — what yabeda's shared store gives a Puma
//! cluster.

use crate::gvl::GvlTimes;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// 5 ms … 10 s: yabeda-rails' buckets plus a few between, for p99 around 0.5–2 s.
pub const DURATION_BUCKETS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 7.5, 10.0,
];

/// 1 ms … 10 s: queue time is near zero while threads are free, so the low end is finer.
pub const QUEUE_TIME_BUCKETS: [f64; 17] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 7.5,
    10.0,
];

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Seconds = Counter<f64, AtomicU64>;

pub struct Metrics {
    registry: Registry,
    duration: Histogram,
    queue_time: Histogram,
    requests: Family<Vec<(String, String)>, Counter>,
    gvl_wait: Seconds,
    io_wait: Seconds,
    running: Seconds,
    db_pool_wait: Seconds,
    puma: [Family<Vec<(String, String)>, Gauge>; 4],
    resident: Gauge,
    cpu: Seconds,
    /// Scrapes of several workers' ports at once must not add the same delta twice.
    cpu_update: std::sync::Mutex<()>,
}

/// yabeda-puma-plugin's gauges for one worker (label `worker`).
#[derive(Clone)]
pub struct PumaGauges {
    /// Requests read but waiting for a thread.
    pub backlog: Gauge,
    /// Threads busy with a request.
    pub running: Gauge,
    /// Threads free to take a request.
    pub pool_capacity: Gauge,
    pub max_threads: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let duration = Histogram::new(DURATION_BUCKETS);
        let queue_time = Histogram::new(QUEUE_TIME_BUCKETS);
        let requests = Family::<Vec<(String, String)>, Counter>::default();
        let (gvl_wait, io_wait, running, db_pool_wait) = Default::default();
        let puma: [Family<Vec<(String, String)>, Gauge>; 4] = Default::default();
        let resident = Gauge::<i64>::default();
        let cpu = Seconds::default();
        registry.register(
            "rails_request_duration_seconds",
            "Request processing time, from the request being read to the response",
            duration.clone(),
        );
        registry.register(
            "rails_request_queue_time_seconds",
            "Time from the load balancer's X-Request-Start to the app picking the request up",
            queue_time.clone(),
        );
        registry.register("rails_requests", "Requests by status", requests.clone());
        registry.register(
            "ruby_gvl_wait_seconds",
            "Time request threads spent ready but waiting for the GVL (falcon: the event loop)",
            Seconds::clone(&gvl_wait),
        );
        registry.register(
            "ruby_io_wait_seconds",
            "Time request threads spent in I/O with the GVL released",
            Seconds::clone(&io_wait),
        );
        registry.register(
            "ruby_running_seconds",
            "Time request threads spent holding the GVL",
            Seconds::clone(&running),
        );
        registry.register(
            "ruby_db_pool_wait_seconds",
            "Falcon: time requests waited for a DB slot (DB_POOL semaphore)",
            Seconds::clone(&db_pool_wait),
        );
        let puma_help = [
            (
                "puma_backlog",
                "Requests read but waiting for a free thread",
            ),
            ("puma_running", "Threads busy with a request"),
            ("puma_pool_capacity", "Threads free to take a request"),
            ("puma_max_threads", "Threads per worker"),
        ];
        for ((name, help), family) in puma_help.iter().zip(puma.iter()) {
            registry.register(*name, *help, family.clone());
        }
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory of the process (all workers), from /proc/self/status",
            Gauge::<i64>::clone(&resident),
        );
        // What a real process exports too (client libraries' `process_cpu_seconds_total`), and
        // what cAdvisor's container CPU would see of a one-process pod: lets the capacity
        // model's standard-metrics fallback be measured against the GVL counters off-cluster.
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time of the process (all workers and threads), from getrusage",
            Seconds::clone(&cpu),
        );
        Metrics {
            registry,
            duration,
            queue_time,
            requests,
            gvl_wait,
            io_wait,
            running,
            db_pool_wait,
            puma,
            resident,
            cpu,
            cpu_update: std::sync::Mutex::new(()),
        }
    }

    pub fn observe_request(&self, status: u16, elapsed: Duration, times: &GvlTimes) {
        self.duration.observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&vec![("status".to_string(), status.to_string())])
            .inc();
        self.gvl_wait.inc_by(times.gvl_wait.as_secs_f64());
        self.io_wait.inc_by(times.io_wait.as_secs_f64());
        self.running.inc_by(times.running.as_secs_f64());
    }

    /// Only requests that carried a usable `X-Request-Start` are recorded.
    pub fn observe_queue_time(&self, waited: Duration) {
        self.queue_time.observe(waited.as_secs_f64());
    }

    pub fn observe_db_pool_wait(&self, waited: Duration) {
        self.db_pool_wait.inc_by(waited.as_secs_f64());
    }

    /// The Puma gauges of one worker.
    pub fn puma_worker(&self, worker: usize) -> PumaGauges {
        let label = vec![("worker".to_string(), worker.to_string())];
        let [backlog, running, pool_capacity, max_threads] = self
            .puma
            .each_ref()
            .map(|f| f.get_or_create(&label).clone());
        PumaGauges {
            backlog,
            running,
            pool_capacity,
            max_threads,
        }
    }

    /// The exposition text, with resident memory read now.
    pub fn render(&self) -> String {
        if let Some(bytes) = resident_memory_bytes() {
            self.resident.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        {
            let _one_at_a_time = self.cpu_update.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(now) = process_cpu_seconds() {
                // A counter only grows: add what was used since the last scrape.
                let delta = now - self.cpu.get();
                if delta > 0.0 {
                    self.cpu.inc_by(delta);
                }
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// User + system CPU seconds of this process so far (every thread), microsecond resolution.
pub fn process_cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// VmRSS of this process, from /proc (Linux only; `None` elsewhere).
pub fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_reference_app_names() {
        let m = Metrics::new();
        let times = GvlTimes {
            gvl_wait: Duration::from_millis(250),
            io_wait: Duration::from_millis(500),
            running: Duration::from_millis(125),
        };
        m.observe_request(200, Duration::from_millis(900), &times);
        m.observe_request(500, Duration::from_millis(3), &GvlTimes::default());
        m.observe_queue_time(Duration::from_millis(2));
        m.puma_worker(1).max_threads.set(5);
        let text = m.render();
        for needle in [
            "rails_request_duration_seconds_bucket{le=\"0.75\"} 1",
            "rails_request_duration_seconds_bucket{le=\"1.0\"} 2",
            "rails_request_duration_seconds_bucket{le=\"0.005\"} 1",
            "rails_request_duration_seconds_count 2",
            "rails_request_queue_time_seconds_bucket{le=\"0.001\"} 0",
            "rails_request_queue_time_seconds_bucket{le=\"0.0025\"} 1",
            "rails_request_queue_time_seconds_count 1",
            "rails_requests_total{status=\"200\"} 1",
            "rails_requests_total{status=\"500\"} 1",
            "ruby_gvl_wait_seconds_total 0.25",
            "ruby_io_wait_seconds_total 0.5",
            "ruby_running_seconds_total 0.125",
            "puma_backlog{worker=\"1\"} 0",
            "puma_max_threads{worker=\"1\"} 5",
            "process_resident_memory_bytes ",
            "process_cpu_seconds_total ",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn reads_vm_rss() {
        assert_eq!(
            parse_vm_rss("Name:\tx\nVmRSS:\t  2048 kB\nVmSwap: 0 kB\n"),
            Some(2 * 1024 * 1024)
        );
        assert_eq!(parse_vm_rss("Name: x\n"), None);
        assert!(resident_memory_bytes().unwrap_or(1) > 0);
    }

    #[test]
    fn process_cpu_grows_with_work() {
        let before = process_cpu_seconds().unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = process_cpu_seconds().unwrap();
        assert!(after > before, "{before} → {after}");
    }
}
