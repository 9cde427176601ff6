//! Which series each check cannot do without: the built-in checks' metric names (with who
//! writes them and what to use instead), and the selectors of a custom query's PromQL.

use promql_parser::parser::{Expr, VectorSelector};

use crate::api::{BuiltinMetric, MetricNames, MetricPreset};

use super::super::queries::{CPU_QUOTA, CPU_SHARES, MEMORY_LIMIT};
use super::series::{lookup, selector, Appears, Need, Series, Target};

fn series(name: &str, t: &Target, appears: Appears, writer: &str) -> Series {
    let cadvisor = writer == CADVISOR;
    Series {
        metric: name.to_string(),
        query: lookup(&selector(name, t, cadvisor), &t.windows),
        appears,
        writer: writer.to_string(),
    }
}

/// The working set from cAdvisor: memory, memoryGrowth and timeToLimit.
fn cadvisor_memory(names: &MetricNames, t: &Target) -> Need {
    Need {
        any_of: vec![series(&names.memory, t, Appears::AtScrape, CADVISOR)],
        instead: "have Prometheus scrape the kubelet's cAdvisor, or set \
                  spec.analysis.metrics.memory to a per-pod memory gauge the app exports"
            .into(),
    }
}

const CADVISOR: &str = "the kubelet's cAdvisor (Prometheus scraping /metrics/cadvisor with \
                        namespace, pod and container labels)";
const POOL_WRITER: &str = "the concurrency-metrics gem with ActiveRecord (docs/your-app.md), \
                           this repository's reference images and gvl-sim";
const GVL_WRITER: &str = "the concurrency-metrics gem (this repository's, docs/your-app.md), \
                          its reference images and gvl-sim; no published gem writes it";

/// Who writes the request counter and the request-duration histogram under a preset's names.
fn request_writer(preset: Option<MetricPreset>) -> &'static str {
    match preset {
        Some(MetricPreset::Yabeda) => "yabeda-rails (through yabeda-prometheus)",
        Some(MetricPreset::PrometheusExporter) => {
            "prometheus_exporter's web collector (PrometheusExporter::Middleware)"
        }
        _ => "yabeda-rails (same names), this repository's reference images and gvl-sim",
    }
}

fn queue_writer(preset: Option<MetricPreset>) -> &'static str {
    match preset {
        Some(MetricPreset::Yabeda) => {
            "yabeda-rack-queue, only for requests carrying the load balancer's X-Request-Start"
        }
        Some(MetricPreset::PrometheusExporter) => {
            "prometheus_exporter's middleware, only for requests carrying X-Request-Start or \
             X-Queue-Start"
        }
        _ => "the reference images and gvl-sim, from the load balancer's X-Request-Start",
    }
}

fn puma_writer(preset: Option<MetricPreset>) -> &'static str {
    match preset {
        Some(MetricPreset::Yabeda) => "yabeda-puma-plugin (Puma's stats)",
        Some(MetricPreset::PrometheusExporter) => {
            "prometheus_exporter's Puma collector (PrometheusExporter::Instrumentation::Puma)"
        }
        _ => "the reference images and gvl-sim (Puma's stats)",
    }
}

pub(super) const ALL_PRESETS: [MetricPreset; 3] = [
    MetricPreset::Yabeda,
    MetricPreset::PrometheusExporter,
    MetricPreset::ReferenceApp,
];

/// The series of a histogram (or, for prometheus_exporter, possibly a Summary).
fn histogram(name: &str, names: &MetricNames, t: &Target, writer: &str) -> Vec<Series> {
    let mut any = vec![series(
        &format!("{name}_bucket"),
        t,
        Appears::WithRequests,
        writer,
    )];
    if names.may_be_summaries {
        any.push(series(name, t, Appears::WithRequests, writer));
    }
    any
}

/// What to do about a request series of the wrong exporter: the preset whose names the pods
/// do export, found by `judge` (`{other}` is filled in there).
pub(super) const PRESET_HINT: &str =
    "set spec.analysis.metrics.preset to the app's exporter (on a \
                           prometheus_exporter app: preset: prometheusExporter) or set \
                           spec.analysis.metrics.";

pub(super) fn builtin_needs(
    which: BuiltinMetric,
    names: &MetricNames,
    preset: Option<MetricPreset>,
    t: &Target,
) -> Vec<Need> {
    let rw = request_writer(preset);
    let requests = || Need {
        any_of: vec![series(&names.requests_total, t, Appears::WithRequests, rw)],
        instead: format!("{PRESET_HINT}requestsTotal to the app's request counter"),
    };
    let duration = || Need {
        any_of: histogram(&names.request_duration, names, t, rw),
        instead: format!("{PRESET_HINT}requestDuration to the app's request-duration histogram"),
    };
    let puma = |name: &str| Need {
        any_of: vec![series(name, t, Appears::AtScrape, puma_writer(preset))],
        instead: "add yabeda-puma-plugin (or prometheus_exporter's Puma collector), or drop \
                  the check"
            .into(),
    };
    let cpu = || Need {
        any_of: vec![
            series(&names.running_seconds, t, Appears::WithRequests, GVL_WRITER),
            series(&names.cpu_usage, t, Appears::AtScrape, CADVISOR),
        ],
        instead: format!(
            "have Prometheus scrape the kubelet's cAdvisor (CPU per request comes from {}, \
             spec.analysis.metrics.cpuUsage), or drop the check",
            names.cpu_usage
        ),
    };
    match which {
        BuiltinMetric::Latency => vec![duration()],
        BuiltinMetric::TimeToLimit => vec![
            cadvisor_memory(names, t),
            Need {
                any_of: vec![series(MEMORY_LIMIT, t, Appears::AtScrape, CADVISOR)],
                instead: "keep cAdvisor's container_spec_* series (a metric_relabel_configs \
                          rule may drop them), or judge memoryGrowth instead"
                    .into(),
            },
        ],
        BuiltinMetric::Memory | BuiltinMetric::MemoryGrowth => vec![cadvisor_memory(names, t)],
        // Written by async servers only: the target is usually the threaded baseline, which
        // never has it; the candidate does not exist yet. Nothing to look up before traffic
        // (without the probe the check has no candidate value: Inconclusive, never a pass).
        BuiltinMetric::EventLoopLag => Vec::new(),
        BuiltinMetric::GvlWait => vec![
            Need {
                any_of: vec![series(
                    &names.gvl_wait_seconds,
                    t,
                    Appears::WithRequests,
                    GVL_WRITER,
                )],
                instead: "add the concurrency-metrics gem to the app, or drop the gvlWait \
                          check and judge waiting with queueTime (needs the load balancer's \
                          X-Request-Start) or backlog (Puma's stats) instead"
                    .into(),
            },
            duration(),
        ],
        // The base counter: its 5xx series never exist on a healthy app.
        BuiltinMetric::ErrorRate => vec![requests()],
        BuiltinMetric::QueueTime => vec![Need {
            any_of: histogram(&names.queue_time, names, t, queue_writer(preset)),
            instead: "have the load balancer set X-Request-Start (docs/experiment-reference.md, \
                      \"Queue time\"), or use the backlog check (Puma's own stats, no header)"
                .into(),
        }],
        BuiltinMetric::Backlog => vec![puma(&names.backlog)],
        // Busy threads come from the pool capacity when there is no busy-threads gauge.
        BuiltinMetric::ThreadUtilization => {
            vec![puma(&names.max_threads), puma(&names.pool_capacity)]
        }
        BuiltinMetric::Headroom => vec![requests(), cpu()],
        BuiltinMetric::DbPoolWait => vec![
            Need {
                any_of: vec![series(
                    &names.db_pool_wait_seconds,
                    t,
                    Appears::WithRequests,
                    POOL_WRITER,
                )],
                instead: "add the concurrency-metrics gem (it times ActiveRecord's connection \
                          checkout waits), or judge the pool with a custom check on \
                          yabeda-activerecord's activerecord_connection_pool_waiting"
                    .into(),
            },
            duration(),
        ],
        BuiltinMetric::CpuUtilization => {
            let cadvisor = |name: &str| series(name, t, Appears::AtScrape, CADVISOR);
            vec![
                Need {
                    any_of: vec![cadvisor(&names.cpu_usage)],
                    instead: format!(
                        "have Prometheus scrape the kubelet's cAdvisor, or set \
                         spec.analysis.metrics.cpuUsage to the containers' CPU counter (now {})",
                        names.cpu_usage
                    ),
                },
                Need {
                    any_of: vec![cadvisor(CPU_QUOTA), cadvisor(CPU_SHARES)],
                    instead: "keep cAdvisor's container_spec_* series (a metric_relabel_configs \
                              rule may drop them), or drop the check"
                        .into(),
                },
            ]
        }
    }
}

/// A custom query's selectors that its value cannot do without, as lookups with only the
/// labels the templates fill in (and the metric name): other matchers (`status=~"5.."`) pick
/// label values that may never have occurred. Selectors under `or` or inside
/// `absent()`/`absent_over_time()` are the query's own handling of absence.
pub(super) fn custom_selectors(expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Aggregate(a) => {
            custom_selectors(&a.expr, out);
            if let Some(p) = &a.param {
                custom_selectors(p, out);
            }
        }
        Expr::Unary(u) => custom_selectors(&u.expr, out),
        Expr::Binary(b) if b.op.to_string() == "or" => {}
        Expr::Binary(b) => {
            custom_selectors(&b.lhs, out);
            // `a unless b`: b may be empty.
            if b.op.to_string() != "unless" {
                custom_selectors(&b.rhs, out);
            }
        }
        Expr::Paren(p) => custom_selectors(&p.expr, out),
        Expr::Subquery(s) => custom_selectors(&s.expr, out),
        Expr::VectorSelector(vs) => out.extend(kept_matchers(vs)),
        Expr::MatrixSelector(m) => out.extend(kept_matchers(&m.vs)),
        Expr::Call(c) if c.func.name.starts_with("absent") => {}
        Expr::Call(c) => c.args.args.iter().for_each(|a| custom_selectors(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// `None` when nothing that names a metric is left (`{job="x"}`): that cannot be looked up
/// without the labels it was meant to pick.
fn kept_matchers(vs: &VectorSelector) -> Option<String> {
    let kept: Vec<String> = vs
        .matchers
        .matchers
        .iter()
        .filter(|m| ["__name__", "namespace", "pod", "container"].contains(&m.name.as_str()))
        .map(|m| m.to_string())
        .collect();
    let named = vs.name.is_some() || kept.iter().any(|m| m.starts_with("__name__"));
    named.then(|| {
        format!(
            "{}{{{}}}",
            vs.name.as_deref().unwrap_or_default(),
            kept.join(",")
        )
    })
}
