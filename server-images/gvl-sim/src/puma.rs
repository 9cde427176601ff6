//! Threaded mode, shaped like a Puma worker: a reactor reads requests off connections and
//! hands them to a fixed pool of `RAILS_MAX_THREADS` OS threads that share one GVL. A thread
//! holds the GVL for CPU work and releases it while blocked in I/O. The worker accepts new
//! connections only while it has a free thread (Puma's `wait_until_not_full`), so excess
//! connections wait in the kernel's accept backlog, where another worker can take them.
//!
//! `/metrics` and `/healthz` are answered by the reactor, not the pool — like yabeda's
//! separate exporter server — so scrapes still work when every thread is busy.

use crate::config::CpuClock;
use crate::gvl::{Gvl, GvlTimes};
use crate::http::{route, simple, Body, Route};
use crate::memory::Resident;
use crate::metrics::PumaGauges;
use crate::shared::Shared;
use crate::work::Step;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{oneshot, Notify};

struct Job {
    steps: Vec<Step>,
    fail: bool,
    /// `X-Request-Start`, seconds since the epoch.
    request_start: Option<f64>,
    reply: oneshot::Sender<Response<Body>>,
}

struct Pool {
    threads: usize,
    /// Requests queued or running.
    in_flight: AtomicUsize,
    /// Signalled whenever a thread finishes a request.
    freed: Notify,
    jobs: Mutex<mpsc::Sender<Job>>,
    gauges: PumaGauges,
}

/// Runs one request's steps on the calling pool thread.
pub fn run_steps(gvl: &Gvl, steps: &[Step], clock: CpuClock) -> GvlTimes {
    let mut times = GvlTimes::default();
    for step in steps {
        match *step {
            Step::Cpu(d) => gvl.run_cpu(d, clock, &mut times),
            Step::Io(d) | Step::Db(d) => {
                let t = Instant::now();
                std::thread::sleep(d);
                times.io_wait += t.elapsed();
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
    let gvl = Arc::new(Gvl::new());
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let gauges = shared.metrics.puma_worker(worker);
    let threads = shared.config.threads;
    gauges.max_threads.set(threads as i64);
    gauges.pool_capacity.set(threads as i64);
    let pool = Arc::new(Pool {
        threads,
        in_flight: AtomicUsize::new(0),
        freed: Notify::new(),
        jobs: Mutex::new(tx),
        gauges,
    });
    // Allocated here, on the caller, so it is resident when `server::start` returns.
    let worker_memory = Resident::hold(shared.config.memory.worker_mb);
    for t in 0..pool.threads {
        let (gvl, rx, pool, shared) = (gvl.clone(), rx.clone(), pool.clone(), shared.clone());
        let thread_memory = Resident::hold(shared.config.memory.thread_mb);
        std::thread::Builder::new()
            .name(format!("puma-w{worker}-t{t}"))
            .spawn(move || {
                // Held for the thread's life, like its stack and per-thread allocations.
                let _held = thread_memory;
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let g = &pool.gauges;
                    g.backlog.dec();
                    g.running.inc();
                    g.pool_capacity.dec();
                    // Like yabeda-rails, the duration starts when the app gets the request: the
                    // wait for a thread shows in `puma_backlog`, not in the histogram.
                    let started = Instant::now();
                    // Queue time ends here, as the app sees it: when a thread picks it up.
                    if let Some(t) = job.request_start {
                        let waited = crate::queue_time::since(t, std::time::SystemTime::now());
                        shared.metrics.observe_queue_time(waited);
                    }
                    let times = run_steps(&gvl, &job.steps, shared.config.work.cpu_clock);
                    // Recorded even if the client has gone: Puma finishes the request too.
                    let resp = shared.finish(worker, job.fail, started, &times);
                    g.running.dec();
                    g.pool_capacity.inc();
                    pool.in_flight.fetch_sub(1, Ordering::AcqRel);
                    pool.freed.notify_one();
                    let _ = job.reply.send(resp);
                }
            })?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("puma-w{worker}-reactor"))
        .spawn(move || {
            // The worker's booted-app memory lives as long as its reactor.
            let _held = worker_memory;
            runtime.block_on(reactor(worker, listener, pool, shared))
        })?;
    Ok(())
}

async fn reactor(
    worker: usize,
    listener: std::net::TcpListener,
    pool: Arc<Pool>,
    shared: Arc<Shared>,
) {
    let Some(listener) = crate::http::listen(worker, listener) else {
        return;
    };
    loop {
        while pool.in_flight.load(Ordering::Acquire) >= pool.threads {
            pool.freed.notified().await;
        }
        let stream = crate::http::accept(worker, &listener).await;
        let (pool, shared) = (pool.clone(), shared.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(req, pool.clone(), shared.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    pool: Arc<Pool>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, Infallible> {
    let r = route(
        req.method(),
        req.uri().path(),
        req.uri().query(),
        &shared.config.work,
    );
    let Route::Work(spec) = r else {
        return Ok(simple(&r, || shared.metrics.render()));
    };
    let (steps, fail) = shared.prepare(&spec);
    let request_start = crate::queue_time::from_headers(req.headers());
    let (reply, done) = oneshot::channel();
    pool.in_flight.fetch_add(1, Ordering::AcqRel);
    pool.gauges.backlog.inc();
    let sent = match pool.jobs.lock() {
        Ok(jobs) => jobs
            .send(Job {
                steps,
                fail,
                request_start,
                reply,
            })
            .is_ok(),
        Err(_) => false,
    };
    let resp = if sent { done.await.ok() } else { None };
    let Some(resp) = resp else {
        // The pool is gone (a thread panicked); answer rather than hang.
        return Ok(crate::http::text(
            http::StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "thread pool unavailable\n".into(),
        ));
    };
    Ok(resp)
}
