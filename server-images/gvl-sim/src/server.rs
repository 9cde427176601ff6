//! Starting the server: one shared listening socket, `WEB_CONCURRENCY` workers that each
//! accept from it (as forked Puma/Falcon workers do), memory-growth faults.
//!
//! Workers are shards of one process, not child processes: each has its own GVL (puma) or its
//! own single-threaded event loop (falcon), so the concurrency behaviour per worker is the
//! same as a forked worker's, while metrics aggregate over all workers for free (shared
//! atomics) and the process's resident memory is the sum, like the container's.

use crate::config::{ServeConfig, ServerKind};
use crate::metrics::Metrics;
pub use crate::shared::{grow_memory, Shared};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A started server.
pub struct Running {
    pub addr: SocketAddr,
    /// The `METRICS_PORT` listener, if any.
    pub metrics_addr: Option<SocketAddr>,
}

/// Puma's default accept backlog.
const BACKLOG: i32 = 1024;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Binds `ip:PORT` and starts all workers on background threads.
pub fn start(config: ServeConfig, ip: IpAddr) -> std::io::Result<Running> {
    let listener = listen(SocketAddr::new(ip, config.port))?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        config,
        metrics: Metrics::new(),
    });
    for worker in 0..shared.config.workers {
        let listener = listener.try_clone()?;
        match shared.config.server {
            ServerKind::Puma => crate::puma::spawn_worker(worker, listener, shared.clone())?,
            ServerKind::Falcon => crate::falcon::spawn_worker(worker, listener, shared.clone())?,
        }
    }
    let metrics_addr = match shared.config.metrics_port {
        Some(port) => Some(spawn_metrics_listener(
            SocketAddr::new(ip, port),
            shared.clone(),
        )?),
        None => None,
    };
    let per_minute = shared.config.faults.memory_growth_kb_per_minute;
    if per_minute > 0 {
        std::thread::Builder::new()
            .name("memory-growth".into())
            .spawn(move || grow_per_minute(per_minute))?;
    }
    Ok(Running { addr, metrics_addr })
}

/// `/metrics` and `/healthz` on their own port and thread, like the Ruby app's `METRICS_PORT`
/// (and yabeda's exporter): scrapes work even while every worker is busy.
fn spawn_metrics_listener(addr: SocketAddr, shared: Arc<Shared>) -> std::io::Result<SocketAddr> {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    let listener = listen(addr)?;
    let local = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    eprintln!("gvl-sim: cannot listen on METRICS_PORT");
                    return;
                };
                while let Ok((stream, _)) = listener.accept().await {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                            let shared = shared.clone();
                            async move {
                                let r = match req.uri().path() {
                                    "/metrics" => crate::http::Route::Metrics,
                                    "/healthz" => crate::http::Route::Health,
                                    _ => crate::http::Route::NotFound,
                                };
                                let resp = crate::http::simple(&r, || shared.metrics.render());
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        });
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = http1::Builder::new().serve_connection(io, svc).await;
                    });
                }
            })
        })?;
    Ok(local)
}

/// Grows memory at `kb_per_minute`, in one-second steps.
fn grow_per_minute(kb_per_minute: u64) {
    let start = Instant::now();
    let mut grown = 0u64;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let due = (kb_per_minute as f64 * start.elapsed().as_secs_f64() / 60.0) as u64;
        grow_memory(due.saturating_sub(grown));
        grown = grown.max(due);
    }
}
