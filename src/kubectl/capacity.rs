//! The capacity per thread count for people: Puma 1…n threads and Falcon at the measured CPU
//! and I/O per request, next to the Amdahl table (`kubectl concurrency recommend`, and
//! `concurrency-operator recommend` given the times by hand). The model is
//! `analysis::capacity`'s, the one the capacity gate uses.

use crate::analysis::recommend::MAX_THREADS;
use crate::analysis::{headroom, pod_capacity, PerRequest, Unit};
use crate::api::{RenderedServer, ServerKind};

use super::table::Table;
use crate::analysis::{recommend, recommendation_table};
use crate::cli::RecommendArgs;

/// `concurrency-operator recommend`: the Amdahl table for the I/O share given (or made of the
/// two times), and with the times the capacity per thread count for `--workers`.
pub fn offline_report(args: &RecommendArgs) -> String {
    let times = args
        .cpu_per_request
        .zip(args.io_per_request)
        .map(|(cpu, io)| PerRequest {
            cpu: cpu.as_secs_f64(),
            io: io.as_secs_f64(),
            blocking: 0.0,
        });
    let p = args
        .io_ratio
        .or_else(|| times.map(|t| t.io / (t.cpu + t.io)))
        .filter(|p| p.is_finite())
        .unwrap_or(0.0);
    let mut out = recommendation_table(p, args.min_gain, args.async_above);
    if let Some(t) = times {
        let rec = recommend(p, args.min_gain, args.async_above);
        let config = RenderedServer {
            server: ServerKind::Puma,
            workers: Some(args.workers),
            threads: args.threads,
            ..RenderedServer::default()
        };
        out.push('\n');
        out.push_str(&capacity_table(
            &config,
            args.cpu_limit,
            t,
            args.rate,
            rec.as_ref().map(|r| r.threads),
            rec.as_ref().map_or(0, |r| r.speedups.len()),
        ));
    }
    out
}

/// `Capacity per pod at …` and one row per Puma thread count (at least 8, as long as the
/// Amdahl table of `amdahl_rows`, and the current count) and Falcon; `rate` (the busiest
/// pod's requests/s) gives the headroom column.
pub fn capacity_table(
    cfg: &RenderedServer,
    cpu_limit: Option<f64>,
    per_request: PerRequest,
    rate: Option<f64>,
    recommended: Option<i32>,
    amdahl_rows: usize,
) -> String {
    let workers = cfg.workers.filter(|w| *w >= 1);
    let w = workers.map_or(1, |w| w.unsigned_abs());
    let current_threads = (cfg.server == ServerKind::Puma)
        .then_some(cfg.threads)
        .flatten()
        .filter(|t| *t >= 1)
        .map(i32::unsigned_abs);
    // As long as the Amdahl table, and long enough to show the current thread count.
    let rows = u32::try_from(amdahl_rows)
        .unwrap_or(MAX_THREADS)
        .max(current_threads.unwrap_or(0))
        .clamp(8, MAX_THREADS);
    let secs = Unit::Seconds;
    let mut out = format!(
        "Capacity per pod at {} CPU + {} I/O per request, {w} worker{}{}{}:\n",
        secs.format(per_request.cpu),
        secs.format(per_request.io),
        if w == 1 { "" } else { "s" },
        if workers.is_none() {
            " (WEB_CONCURRENCY not set: assumed)"
        } else {
            ""
        },
        cpu_limit.map_or(String::new(), |c| format!(", CPU limit {}", cores(c))),
    );
    out.push_str(
        "a Puma worker with t threads ≈ min(t / (cpu + io), 1 / cpu), a Falcon worker ≈ 1 / cpu; \
         the pod = workers × that, capped by the CPU limit (limit / cpu)\n",
    );
    let mut t = Table::new([
        "SERVER",
        "THREADS",
        "PER WORKER",
        "PER POD",
        "BOUND",
        "HEADROOM",
        "",
    ]);
    let mut row = |server: ServerKind, threads: Option<u32>, note: String| {
        let Some(c) = pod_capacity(server, w, threads, per_request, cpu_limit) else {
            return;
        };
        t.row([
            server.to_string(),
            threads.map_or("-".to_string(), |t| t.to_string()),
            req_s(c.per_worker),
            req_s(c.per_pod),
            c.bound.as_str().to_string(),
            rate.and_then(|r| headroom(r, c.per_pod))
                .map_or("-".to_string(), percent),
            note,
        ]);
    };
    for n in 1..=rows {
        let mut notes = Vec::new();
        if current_threads == Some(n) {
            notes.push("← now");
        }
        if recommended.and_then(|r| u32::try_from(r).ok()) == Some(n) {
            notes.push("← recommended (Amdahl)");
        }
        row(ServerKind::Puma, Some(n), notes.join(" "));
    }
    let falcon_now = if cfg.server == ServerKind::Falcon {
        "← now"
    } else {
        ""
    };
    row(ServerKind::Falcon, None, falcon_now.to_string());
    out.push_str(&t.render());
    out.push_str(&match rate {
        Some(r) => format!(
            "Headroom = 1 − busiest pod's rate ({}) / capacity; negative: the pod serves more \
             than the estimate.\n",
            req_s(r)
        ),
        None => "Headroom: no request rate measured.\n".to_string(),
    });
    out
}

fn req_s(v: f64) -> String {
    format!("{v:.1} req/s")
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn cores(c: f64) -> String {
    let s = format!("{c:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", if c == 1.0 { "core" } else { "cores" })
}
