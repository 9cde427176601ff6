use clap::{Parser, Subcommand};
use gvl_sim::config::ServeConfig;
use gvl_sim::load::LoadArgs;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "gvl-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve (the default). Configured by environment: SERVER, WEB_CONCURRENCY,
    /// RAILS_MAX_THREADS (PUMA_MAX_THREADS), PORT, METRICS_PORT, CPU_MS, IO_MS, IO_CALLS,
    /// DB_MS, DB_CALLS, JITTER, CPU_CLOCK, DB_POOL (DB_CONCURRENCY), ERROR_RATE, EXTRA_LATENCY_MS,
    /// MEMORY_GROWTH_KB_PER_REQUEST, MEMORY_GROWTH_KB_PER_MINUTE, SLOW_START_S, WORKER_MEMORY_MB,
    /// THREAD_MEMORY_MB (see README).
    Serve {
        /// Address to listen on (the port comes from PORT).
        #[arg(long, default_value = "0.0.0.0")]
        bind: IpAddr,
        /// Workers, as `puma -w N`: overrides WEB_CONCURRENCY, like Puma's own flag.
        #[arg(short = 'w', long)]
        workers: Option<String>,
        /// Threads per worker, as `puma -t MIN:MAX` (or `-t MAX`): the maximum overrides
        /// PUMA_MAX_THREADS / RAILS_MAX_THREADS, like Puma's own flag.
        #[arg(short = 't', long)]
        threads: Option<String>,
    },
    /// Send load to a loopback (or --allow-cidr) target.
    Load(LoadArgs),
    /// A webhook receiver for tests: keeps every POST, lists them at `GET /received`.
    /// FAIL_FIRST=N answers the first N posts to each path with 503.
    Receive {
        #[arg(long, default_value = "0.0.0.0:8080")]
        listen: std::net::SocketAddr,
    },
}

/// Puma's command-line flags win over its environment; the e2e suite runs targets that set
/// their concurrency this way (`puma -w 2 -t 6:6` in a Procfile).
#[derive(Default)]
struct Flags {
    workers: Option<String>,
    threads: Option<String>,
}

fn serve(bind: IpAddr, flags: Flags) -> ExitCode {
    let max_threads = flags
        .threads
        .as_deref()
        .map(|t| t.rsplit(':').next().unwrap_or(t).to_string());
    let config = match ServeConfig::from_lookup(&|var| {
        let flag = match var {
            "WEB_CONCURRENCY" => flags.workers.clone(),
            "PUMA_MAX_THREADS" => max_threads.clone(),
            _ => None,
        };
        if flag.is_some() {
            return Ok(flag);
        }
        match std::env::var(var) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(gvl_sim::config::ConfigError::NotUnicode(var))
            }
        }
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gvl-sim: configuration error ({}): {e}", e.category());
            return ExitCode::from(2);
        }
    };
    if config.faults.slow_start_s > 0.0 {
        // Like a Rails app loading: the port opens only when boot is done.
        eprintln!(
            "gvl-sim: booting for {} s (SLOW_START_S)",
            config.faults.slow_start_s
        );
        std::thread::sleep(Duration::from_secs_f64(config.faults.slow_start_s));
    }
    let summary = format!(
        "{config:?}, simulated memory {} MiB",
        config
            .memory
            .total_mb(config.server, config.workers, config.threads)
    );
    let running = match gvl_sim::server::start(config, bind) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gvl-sim: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!("gvl-sim: listening on {} with {summary}", running.addr);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term => {},
        }
    });
    eprintln!("gvl-sim: shutting down");
    ExitCode::SUCCESS
}

fn load(args: LoadArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(gvl_sim::load::run(&args)) {
        Ok(summary) => {
            if args.json {
                match serde_json::to_string_pretty(&summary) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("gvl-sim: json: {e}"),
                }
            } else {
                print!("{}", gvl_sim::load::report::table(&summary));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gvl-sim load: {} ({})", e, e.category());
            ExitCode::from(2)
        }
    }
}

fn receive(listen: std::net::SocketAddr) -> ExitCode {
    let fail_first = match std::env::var("FAIL_FIRST").ok().map(|v| v.parse::<usize>()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("gvl-sim receive: FAIL_FIRST: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(gvl_sim::receive::run(listen, fail_first)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gvl-sim receive: {e}");
            ExitCode::from(1)
        }
    }
}

/// The single-threaded runtime each subcommand runs on.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("gvl-sim: runtime: {e}");
            ExitCode::from(1)
        })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        None => serve(IpAddr::from([0, 0, 0, 0]), Flags::default()),
        Some(Cmd::Serve {
            bind,
            workers,
            threads,
        }) => serve(bind, Flags { workers, threads }),
        Some(Cmd::Load(args)) => load(args),
        Some(Cmd::Receive { listen }) => receive(listen),
    }
}
