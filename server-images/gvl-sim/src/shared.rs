//! What every worker shares, and how a work request ends: kept apart from `server` (which
//! starts the workers of `puma` and `falcon`) so the workers do not import their starter.

use crate::config::ServeConfig;
use crate::gvl::GvlTimes;
use crate::http::{text, work_body, Body};
use crate::metrics::Metrics;
use crate::work::{plan, Step};
use http::{Response, StatusCode};
use std::sync::Mutex;
use std::time::Instant;

/// Memory held on purpose by the memory-growth faults; never freed.
static LEAK: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Allocates and touches `kb` KiB so resident memory really grows.
pub fn grow_memory(kb: u64) {
    if kb == 0 {
        return;
    }
    let block = vec![0xA5u8; (kb as usize) * 1024];
    if let Ok(mut leak) = LEAK.lock() {
        leak.push(block);
    }
}

/// State every worker shares.
pub struct Shared {
    pub config: ServeConfig,
    pub metrics: Metrics,
}

impl Shared {
    /// The steps of one request and whether it will fail (error-rate fault).
    pub fn prepare(&self, spec: &crate::config::WorkSpec) -> (Vec<Step>, bool) {
        let mut rng = fastrand::Rng::new();
        let steps = plan(spec, self.config.faults.extra_latency_ms, &mut rng);
        let fail = rng.f64() < self.config.faults.error_rate;
        (steps, fail)
    }

    /// Records a finished work request and builds its response.
    pub fn finish(
        &self,
        worker: usize,
        fail: bool,
        started: Instant,
        times: &GvlTimes,
    ) -> Response<Body> {
        grow_memory(self.config.faults.memory_growth_kb_per_request);
        let status = if fail {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        self.metrics
            .observe_request(status.as_u16(), started.elapsed(), times);
        let server = self.config.server.as_str();
        text(
            status,
            "application/json",
            work_body(server, worker, status, times),
        )
    }
}
