//! Fixture exporters writing what the real Ruby exporters write: the same metric names,
//! types, suffixes, labels, bucket bounds and line order, read from their sources (yabeda-rails
//! `lib/yabeda/rails.rb` + yabeda-prometheus `build_name` and client_ruby's text format;
//! yabeda-rack-queue `metric.rb`; yabeda-puma-plugin `plugin/yabeda.rb`; prometheus_exporter
//! `server/web_collector.rb`, `server/puma_collector.rb`, `metric/summary.rb`,
//! `metric/histogram.rb`). Only the numbers are made up: counters grow linearly with uptime,
//! request and queue durations are uniform on [0, max], gauges are constant.

/// yabeda-rails' `LONG_RUNNING_REQUEST_BUCKETS`, as Ruby prints them.
const YABEDA_RAILS_BUCKETS: [&str; 16] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60",
    "120", "300", "600",
];
/// yabeda-rack-queue's buckets.
const RACK_QUEUE_BUCKETS: [&str; 14] = [
    "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30",
    "60",
];
/// prometheus_exporter's `Histogram::DEFAULT_BUCKETS` (`--histogram`).
const PE_BUCKETS: [&str; 11] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5.0", "10.0",
];
/// prometheus_exporter's `Summary::DEFAULT_QUANTILES`.
const PE_QUANTILES: [f64; 5] = [0.99, 0.9, 0.5, 0.1, 0.01];
const CONTROLLERS: [&str; 2] = ["products", "carts"];

#[derive(Clone, Copy, PartialEq)]
pub enum Format {
    /// yabeda-rails + yabeda-rack-queue + yabeda-puma-plugin (clustered) via yabeda-prometheus.
    Yabeda,
    /// prometheus_exporter's web and puma collectors; `histogram`: the server runs with
    /// `--histogram`; `busy_gauge`: its process has Puma ≥ 6.6 loaded.
    PrometheusExporter { histogram: bool, busy_gauge: bool },
    /// The reference images: yabeda-rails' request metrics, Puma gauges per `worker`.
    ReferenceApp,
}

/// One Puma worker's `stats`.
#[derive(Clone, Copy)]
pub struct Worker {
    pub backlog: f64,
    /// Puma's `busy_threads`: spawned − waiting + backlog.
    pub busy: f64,
    pub capacity: f64,
    pub max: f64,
}

/// One of a worker's stats.
type Stat = fn(&Worker) -> f64;

pub struct App {
    pub format: Format,
    pub rps: f64,
    pub error_share: f64,
    /// Request durations are uniform on [0, this], half of them per controller.
    pub latency_max: f64,
    /// Queue times are uniform on [0, this].
    pub queue_max: f64,
    /// A Summary's quantile q per controller: q × this (uniform on [0, this]).
    pub summary_max: [f64; 2],
    pub workers: Vec<Worker>,
}

fn f(v: f64) -> String {
    // Ruby prints floats with at least one decimal (`42.0`).
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn cumulative(bound: &str, max: f64) -> f64 {
    bound.parse::<f64>().map_or(1.0, |b| (b / max).min(1.0))
}

/// Bucket, sum and count lines of one label set (`labels` without braces, may be empty).
fn histogram(out: &mut String, name: &str, labels: &str, buckets: &[&str], n: f64, max: f64) {
    let with = |extra: String| match (labels.is_empty(), extra.is_empty()) {
        (true, true) => String::new(),
        (true, false) => format!("{{{extra}}}"),
        (false, true) => format!("{{{labels}}}"),
        (false, false) => format!("{{{labels},{extra}}}"),
    };
    for b in buckets.iter().chain(["+Inf"].iter()) {
        let c = n * cumulative(b, max);
        out.push_str(&format!(
            "{name}_bucket{} {}\n",
            with(format!("le=\"{b}\"")),
            f(c)
        ));
    }
    let plain = with(String::new());
    out.push_str(&format!("{name}_sum{plain} {}\n", f(n * max / 2.0)));
    out.push_str(&format!("{name}_count{plain} {}\n", f(n)));
}

/// `# TYPE` then `# HELP` (client_ruby), or `# HELP` then `# TYPE` (prometheus_exporter).
fn head(out: &mut String, format: Format, name: &str, kind: &str, help: &str) {
    let (t, h) = (
        format!("# TYPE {name} {kind}\n"),
        format!("# HELP {name} {help}\n"),
    );
    match format {
        Format::PrometheusExporter { .. } => out.push_str(&(h + &t)),
        _ => out.push_str(&(t + &h)),
    }
}

impl App {
    /// The exposition after `t` seconds of uptime.
    pub fn text(&self, t: f64) -> String {
        let mut out = String::new();
        match self.format {
            Format::Yabeda | Format::ReferenceApp => self.yabeda_rails(&mut out, t),
            Format::PrometheusExporter { histogram, .. } => {
                self.web_collector(&mut out, t, histogram)
            }
        }
        match self.format {
            Format::Yabeda => self.yabeda_puma(&mut out, t),
            Format::PrometheusExporter { busy_gauge, .. } => {
                self.puma_collector(&mut out, busy_gauge)
            }
            Format::ReferenceApp => self.reference_puma(&mut out),
        }
        out
    }

    /// Requests per controller and status: (controller, status, count).
    fn requests(&self, t: f64) -> Vec<(&'static str, &'static str, f64)> {
        let n = self.rps * t / CONTROLLERS.len() as f64;
        CONTROLLERS
            .iter()
            .flat_map(|c| {
                [
                    (*c, "200", n * (1.0 - self.error_share)),
                    (*c, "500", n * self.error_share),
                ]
            })
            .collect()
    }

    fn yabeda_rails(&self, out: &mut String, t: f64) {
        let labels = |c: &str, s: &str| {
            format!(r#"controller="{c}",action="index",status="{s}",format="html",method="get""#)
        };
        let name = "rails_requests_total";
        let help = "A counter of the total number of HTTP requests rails processed.";
        head(out, self.format, name, "counter", help);
        for (c, s, n) in self.requests(t) {
            out.push_str(&format!("{name}{{{}}} {}\n", labels(c, s), f(n)));
        }
        let name = "rails_request_duration_seconds";
        head(
            out,
            self.format,
            name,
            "histogram",
            "A histogram of the response latency.",
        );
        for (c, s, n) in self.requests(t) {
            histogram(
                out,
                name,
                &labels(c, s),
                &YABEDA_RAILS_BUCKETS,
                n,
                self.latency_max,
            );
        }
        if self.format == Format::Yabeda {
            let name = "rack_queue_duration_seconds";
            let help =
                "Time a request waited in the upstream queue before reaching the application";
            head(out, self.format, name, "histogram", help);
            histogram(
                out,
                name,
                "",
                &RACK_QUEUE_BUCKETS,
                self.rps * t,
                self.queue_max,
            );
        }
    }

    fn yabeda_puma(&self, out: &mut String, t: f64) {
        let per_worker: [(&str, &str, Stat); 5] = [
            (
                "backlog",
                "Number of established but unaccepted connections in the backlog",
                |w| w.backlog,
            ),
            ("running", "Number of running worker threads", |w| w.max),
            ("busy_threads", "Number of busy worker threads", |w| w.busy),
            (
                "pool_capacity",
                "Number of allocatable worker threads",
                |w| w.capacity,
            ),
            ("max_threads", "Maximum number of worker threads", |w| w.max),
        ];
        for (name, help, value) in per_worker {
            let name = format!("puma_{name}");
            head(out, self.format, &name, "gauge", help);
            for (i, w) in self.workers.iter().enumerate() {
                out.push_str(&format!("{name}{{index=\"{i}\"}} {}\n", f(value(w))));
            }
        }
        let name = "puma_requests_count";
        let help = "Number of requests this worker has served since starting";
        head(out, self.format, name, "gauge", help);
        let per = self.rps * t / self.workers.len() as f64;
        for i in 0..self.workers.len() {
            out.push_str(&format!("{name}{{index=\"{i}\"}} {}\n", f(per.floor())));
        }
        let workers = self.workers.len() as f64;
        for (name, help, v) in [
            ("puma_workers", "Number of configured workers", workers),
            ("puma_booted_workers", "Number of booted workers", workers),
            ("puma_old_workers", "Number of old workers", 0.0),
        ] {
            head(out, self.format, name, "gauge", help);
            out.push_str(&format!("{name} {}\n", f(v)));
        }
    }

    fn web_collector(&self, out: &mut String, t: f64, as_histogram: bool) {
        let labels = |c: &str| format!(r#"action="index",controller="{c}""#);
        let name = "ruby_http_requests_total";
        head(
            out,
            self.format,
            name,
            "counter",
            "Total HTTP requests from web app.",
        );
        for (c, s, n) in self.requests(t) {
            out.push_str(&format!("{name}{{{},status=\"{s}\"}} {}\n", labels(c), n));
        }
        let n = self.rps * t / CONTROLLERS.len() as f64;
        for (name, help, max) in [
            (
                "ruby_http_request_duration_seconds",
                "Time spent in HTTP reqs in seconds.",
                None,
            ),
            (
                "ruby_http_request_queue_duration_seconds",
                "Time spent queueing the request in load balancer in seconds.",
                Some(self.queue_max),
            ),
        ] {
            let kind = if as_histogram { "histogram" } else { "summary" };
            head(out, self.format, name, kind, help);
            for (i, c) in CONTROLLERS.iter().enumerate() {
                let max = max.unwrap_or(if as_histogram {
                    self.latency_max
                } else {
                    self.summary_max[i]
                });
                if as_histogram {
                    histogram(out, name, &labels(c), &PE_BUCKETS, n, max);
                    continue;
                }
                for q in PE_QUANTILES {
                    let l = format!("{},quantile=\"{q}\"", labels(c));
                    out.push_str(&format!("{name}{{{l}}} {}\n", f(q * max)));
                }
                out.push_str(&format!("{name}_sum{{{}}} {}\n", labels(c), n * max / 2.0));
                out.push_str(&format!("{name}_count{{{}}} {n}\n", labels(c)));
            }
        }
    }

    /// One series per Puma master, the workers' stats summed (instrumentation/puma.rb).
    fn puma_collector(&self, out: &mut String, busy_gauge: bool) {
        let sum = |v: fn(&Worker) -> f64| self.workers.iter().map(v).sum::<f64>();
        let workers = self.workers.len() as f64;
        let mut gauges: Vec<(&str, &str, f64)> = vec![
            ("workers", "Number of puma workers.", workers),
            ("booted_workers", "Number of puma workers booted.", workers),
            ("old_workers", "Number of old puma workers.", 0.0),
            (
                "running_threads",
                "Number of puma threads currently running.",
                sum(|w| w.max),
            ),
            (
                "request_backlog",
                "Number of requests waiting to be processed by a puma thread.",
                sum(|w| w.backlog),
            ),
            (
                "thread_pool_capacity",
                "Number of puma threads available at current scale.",
                sum(|w| w.capacity),
            ),
            (
                "max_threads",
                "Number of puma threads at available at max scale.",
                sum(|w| w.max),
            ),
        ];
        if busy_gauge {
            gauges.push((
                "busy_threads",
                "Wholistic stat reflecting the overall current state of work to be done and the capacity to do it",
                sum(|w| w.busy),
            ));
        }
        for (name, help, v) in gauges {
            let name = format!("ruby_puma_{name}");
            head(out, self.format, &name, "gauge", help);
            out.push_str(&format!("{name}{{phase=\"0\"}} {v}\n"));
        }
    }

    fn reference_puma(&self, out: &mut String) {
        let gauges: [(&str, Stat); 4] = [
            ("puma_backlog", |w| w.backlog),
            ("puma_running", |w| w.max),
            ("puma_pool_capacity", |w| w.capacity),
            ("puma_max_threads", |w| w.max),
        ];
        for (name, value) in gauges {
            head(
                out,
                self.format,
                name,
                "gauge",
                "Puma::Server#stats of each live worker",
            );
            for (i, w) in self.workers.iter().enumerate() {
                out.push_str(&format!(
                    "{name}{{worker=\"{}\"}} {}\n",
                    100 + i,
                    f(value(w))
                ));
            }
        }
    }
}
