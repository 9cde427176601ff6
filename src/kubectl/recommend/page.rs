//! The report `recommend` prints, and `init`'s sizing note: pure text from a measurement.

use std::time::Duration;

use crate::analysis::{recommend, recommendation_table, PerRequest, Unit};
use crate::api::{format_duration, CapacitySource};
use crate::kubectl::capacity::capacity_table;
use crate::kubectl::render::Table;

use super::{Measurement, Quantity, Target};

/// `init`'s sizing note: the I/O share measured for the target (GVL counters, else standard
/// metrics) and the thread count Amdahl's law gives at the spec's default gains, as comment
/// lines for the starter manifest. `None` when no I/O share could be measured.
pub fn sizing_note(m: &Measurement, window: Duration) -> Option<String> {
    let (p, from) = m.io_share_chosen()?;
    let rec = crate::analysis::recommend_from_spec(p, &Default::default())
        .ok()
        .flatten()?;
    let how = match from {
        CapacitySource::GvlCounters => "from the GVL counters",
        CapacitySource::StandardMetrics => {
            "from standard metrics: (wall − CPU) / wall, GVL wait counted as I/O, so it reads \
             high under load"
        }
    };
    let mut out = format!(
        "# Measured over the last {}: I/O share {:.0}% ({how}).\n# Amdahl: {} threads per \
         process (speedup {:.2}×); `kubectl concurrency recommend` shows the table and the \
         capacity.\n",
        format_duration(window),
        p * 100.0,
        rec.threads,
        rec.speedups
            .get(usize::try_from(rec.threads - 1).unwrap_or(0))
            .copied()
            .unwrap_or(1.0),
    );
    if rec.async_server_advised {
        out.push_str("# Above 95% I/O an async server (Falcon) is advised.\n");
    }
    Some(out)
}

/// Settings of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSettings {
    pub prometheus: String,
    pub window: Duration,
    pub min_gain: f64,
    pub async_above: f64,
}

fn req_s(v: f64) -> String {
    format!("{v:.1} req/s")
}

fn cores(c: f64) -> String {
    let s = format!("{c:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", if c == 1.0 { "core" } else { "cores" })
}

/// The whole report, and the quantities whose query returned nothing.
pub fn report(
    target: &Target,
    m: &Measurement,
    queries: &[(Quantity, String)],
    s: &ReportSettings,
) -> (String, Vec<&'static str>) {
    let secs = Unit::Seconds;
    let cfg = &target.config;
    let mut out = format!(
        "Deployment {} in namespace {}, container {}: {} ({}/{} ready), CPU limit {}\n",
        target.deployment,
        target.namespace,
        target.container,
        cfg.summary(),
        target.ready,
        target.replicas,
        target.cpu_limit.map_or("none".to_string(), cores),
    );
    out.push_str(&format!(
        "Measured over the last {} from {}:\n",
        format_duration(s.window),
        s.prometheus
    ));
    let shown = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("no data".to_string(), f);
    let p = m.io_share_chosen();
    let times = m.times();
    let standard = |s: Option<CapacitySource>| s == Some(CapacitySource::StandardMetrics);
    let mut t = Table::new(["", "", ""]).indented("  ");
    t.row([
        "I/O share p".to_string(),
        shown(p.map(|p| p.0), &|v| format!("{:.1}%", v * 100.0)),
        if standard(p.map(|p| p.1)) {
            "(wall − CPU) / wall, standard metrics: GVL wait counted as I/O".into()
        } else {
            "io / (running + io + gvlWait)".into()
        },
    ]);
    let (cpu_note, io_note) = if standard(times.source) {
        (
            "container CPU seconds per request, standard metrics",
            "wall − CPU per request (I/O and GVL wait), standard metrics",
        )
    } else {
        (
            "running (GVL held) seconds per request",
            "I/O wait seconds per request",
        )
    };
    t.row([
        "CPU per request".to_string(),
        shown(times.cpu, &|v| secs.format(v)),
        cpu_note.into(),
    ]);
    t.row([
        "I/O per request".to_string(),
        shown(times.io, &|v| secs.format(v)),
        io_note.into(),
    ]);
    t.row([
        "busiest pod".to_string(),
        shown(m.busiest_pod_rate, &req_s),
        "requests per second".into(),
    ]);
    // The header row of a label/value list is empty: drop it.
    let listing = t.render();
    out.push_str(listing.split_once('\n').map_or("", |(_, rest)| rest));
    if standard(p.map(|p| p.1)) || standard(times.source) {
        out.push_str(
            "  The GVL counters had no data: figures from standard metrics (cAdvisor's CPU, the \
             request-duration sum/count; docs/capacity.md says what they over- and under-count).\n",
        );
    }

    let rec = p.and_then(|(p, _)| recommend(p, s.min_gain, s.async_above));
    out.push('\n');
    match p {
        Some((p, _)) => out.push_str(&recommendation_table(p, s.min_gain, s.async_above)),
        None => out.push_str("Amdahl table: no I/O share measured.\n"),
    }

    out.push('\n');
    match (times.cpu, times.io) {
        (Some(cpu), Some(io)) => out.push_str(&capacity_table(
            &target.config,
            target.cpu_limit,
            PerRequest {
                cpu,
                io,
                ..PerRequest::default()
            },
            m.busiest_pod_rate,
            rec.as_ref().map(|r| r.threads),
            rec.as_ref().map_or(0, |r| r.speedups.len()),
        )),
        _ => out.push_str("Capacity: needs CPU and I/O per request.\n"),
    }

    let absent = m.missing();
    let missing: Vec<(Quantity, &String)> = queries
        .iter()
        .filter(|(q, _)| absent.contains(q))
        .map(|(q, promql)| (*q, promql))
        .collect();
    if !missing.is_empty() {
        out.push_str("\nNo data (the query returned nothing, or NaN for no requests):\n");
        for (q, promql) in &missing {
            out.push_str(&format!("  {}: {promql}\n", q.name()));
        }
    }
    (out, missing.iter().map(|(q, _)| q.name()).collect())
}
