//! Async mode, shaped like a Falcon worker: one single-threaded event loop, every request its
//! own task (fiber). I/O waits are timers on the loop; CPU work is a busy loop on the loop's
//! own thread, so it blocks every other request of the worker until it ends — fibers are
//! cooperative. `DB_POOL` caps concurrent DB waits per worker, as the seed's
//! `Async::Semaphore` caps DB connections (other I/O waits need no slot).
//!
//! Accounting: `running` is time in CPU work, `io_wait` the I/O timer's own length, and
//! `gvl_wait` the delay between a timer's deadline and the task running again — the time a
//! ready fiber waits for the loop, Falcon's equivalent of waiting for the GVL.

use crate::gvl::{spin_cpu_with, GvlTimes};
use crate::http::{route, simple, Body, Route};
use crate::memory::Resident;
use crate::shared::Shared;
use crate::work::Step;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Runs one request's steps as a task on the current event loop.
pub async fn run_steps(steps: &[Step], db_pool: Option<&Semaphore>, shared: &Shared) -> GvlTimes {
    let mut times = GvlTimes::default();
    for step in steps {
        match *step {
            Step::Cpu(d) => {
                let t = std::time::Instant::now();
                spin_cpu_with(d, shared.config.work.cpu_clock, || {});
                times.running += t.elapsed();
            }
            Step::Io(d) | Step::Db(d) => {
                // Only DB waits need a slot, as in the seed's `with_db_semaphore`.
                let permit = match (step, db_pool) {
                    (Step::Db(_), Some(sem)) => {
                        let t = Instant::now();
                        let p = sem.acquire().await.ok();
                        shared.metrics.observe_db_pool_wait(t.elapsed());
                        p
                    }
                    _ => None,
                };
                let deadline = Instant::now() + d;
                tokio::time::sleep_until(deadline).await;
                times.io_wait += d;
                times.gvl_wait += Instant::now().saturating_duration_since(deadline);
                drop(permit);
            }
        }
    }
    times
}

pub fn spawn_worker(
    worker: usize,
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Allocated here, on the caller, so it is resident when `server::start` returns; held
    // as long as the event loop runs. No per-thread memory: falcon has no thread pool.
    let worker_memory = Resident::hold(shared.config.memory.worker_mb);
    std::thread::Builder::new()
        .name(format!("falcon-w{worker}"))
        .spawn(move || {
            let _held = worker_memory;
            runtime.block_on(event_loop(worker, listener, shared))
        })?;
    Ok(())
}

async fn event_loop(worker: usize, listener: std::net::TcpListener, shared: Arc<Shared>) {
    let Some(listener) = crate::http::listen(worker, listener) else {
        return;
    };
    let db_pool = shared.config.db_pool.map(|n| Arc::new(Semaphore::new(n)));
    loop {
        let stream = crate::http::accept(worker, &listener).await;
        let (shared, db_pool) = (shared.clone(), db_pool.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(worker, req, db_pool.clone(), shared.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn handle(
    worker: usize,
    req: Request<Incoming>,
    db_pool: Option<Arc<Semaphore>>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, Infallible> {
    let started = std::time::Instant::now();
    let r = route(
        req.method(),
        req.uri().path(),
        req.uri().query(),
        &shared.config.work,
    );
    let Route::Work(spec) = r else {
        return Ok(simple(&r, || shared.metrics.render()));
    };
    // The loop starting this task (a work request) is the app picking the request up.
    if let Some(t) = crate::queue_time::from_headers(req.headers()) {
        let waited = crate::queue_time::since(t, std::time::SystemTime::now());
        shared.metrics.observe_queue_time(waited);
    }
    let (steps, fail) = shared.prepare(&spec);
    let times = run_steps(&steps, db_pool.as_deref(), &shared).await;
    Ok(shared.finish(worker, fail, started, &times))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;
    use crate::metrics::Metrics;
    use std::time::Duration;

    fn shared() -> Shared {
        Shared {
            config: ServeConfig::from_lookup(&|_| Ok(None)).unwrap(),
            metrics: Metrics::new(),
        }
    }

    fn pool_wait(shared: &Shared) -> f64 {
        let text = shared.metrics.render();
        let line = text
            .lines()
            .find(|l| l.starts_with("ruby_db_pool_wait_seconds_total "))
            .unwrap();
        line.split(' ').nth(1).unwrap().parse().unwrap()
    }

    /// DB waits queue for a slot; other I/O does not. On tokio's paused clock, so exact.
    #[tokio::test(start_paused = true)]
    async fn only_db_waits_need_a_pool_slot() {
        let shared = Arc::new(shared());
        let pool = Arc::new(Semaphore::new(1));
        let held = pool.clone().acquire_owned().await.unwrap();

        let io = [Step::Io(Duration::from_millis(10))];
        let t = run_steps(&io, Some(&pool), &shared).await;
        assert_eq!(t.io_wait, Duration::from_millis(10));
        assert_eq!(pool_wait(&shared), 0.0);

        let task = {
            let (shared, pool) = (shared.clone(), pool.clone());
            tokio::spawn(async move {
                let db = [Step::Db(Duration::from_millis(5))];
                run_steps(&db, Some(&pool), &shared).await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(held);
        let t = task.await.unwrap();
        assert_eq!(t.io_wait, Duration::from_millis(5));
        assert!(
            (pool_wait(&shared) - 0.05).abs() < 0.002,
            "{}",
            pool_wait(&shared)
        );
    }
}
