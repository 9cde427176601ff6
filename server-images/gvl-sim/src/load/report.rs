//! The load summary: a human table and the same numbers as JSON.

use super::engine::{Model, Plan, Results};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, PartialEq)]
pub struct Summary {
    pub url: String,
    pub model: &'static str,
    /// Open model: the target arrival rate.
    pub rate: Option<f64>,
    pub duration_s: f64,
    pub connections: usize,
    /// `--max-connection-age` in seconds; null when connections are kept for the run.
    pub max_connection_age_s: Option<f64>,
    /// Connections opened, reconnects included (equal to `connections` when none rotated).
    pub connections_opened: u64,
    pub answered: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub unsent: u64,
    pub abandoned: u64,
    pub throughput_rps: f64,
    pub statuses: BTreeMap<String, u64>,
    /// Milliseconds; empty when nothing was answered.
    pub latency_ms: BTreeMap<String, f64>,
    pub last_error: Option<String>,
    /// The first failed requests, each with when it was sent and where it stopped.
    pub failures: Vec<super::engine::Failure>,
    /// Ended by `POST /stop` before `duration_s` (`--control-port`).
    pub stopped_early: bool,
}

const QUANTILES: [(&str, f64); 6] = [
    ("p50", 0.5),
    ("p75", 0.75),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

pub fn summarize(url: &str, plan: &Plan, r: &Results) -> Summary {
    let mut latency_ms = BTreeMap::new();
    if r.answered() > 0 {
        latency_ms.insert("mean".into(), r.latency_us.mean() / 1000.0);
        for (name, q) in QUANTILES {
            let us = r.latency_us.value_at_quantile(q);
            latency_ms.insert(name.to_string(), us as f64 / 1000.0);
        }
    }
    Summary {
        url: url.to_string(),
        model: match plan.model {
            Model::Open { .. } => "open",
            Model::Closed => "closed",
        },
        rate: match plan.model {
            Model::Open { rate } => Some(rate),
            Model::Closed => None,
        },
        duration_s: plan.duration.as_secs_f64(),
        connections: plan.connections,
        max_connection_age_s: plan.max_connection_age.map(|d| d.as_secs_f64()),
        connections_opened: r.connections_opened,
        answered: r.answered(),
        errors: r.errors,
        timeouts: r.timeouts,
        unsent: r.unsent,
        abandoned: r.abandoned,
        throughput_rps: r.throughput(),
        statuses: r
            .statuses
            .iter()
            .map(|(s, n)| (s.to_string(), *n))
            .collect(),
        latency_ms,
        last_error: r.last_error.clone(),
        failures: r.failures.clone(),
        stopped_early: false,
    }
}

pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let model = match s.rate {
        Some(rate) => format!("open, {rate} req/s"),
        None => "closed (back-to-back)".into(),
    };
    out += &format!("target       {}\n", s.url);
    out += &format!(
        "model        {model}, {} s, {} connections\n",
        s.duration_s, s.connections
    );
    let age = match s.max_connection_age_s {
        Some(a) => format!("max age {a} s"),
        None => "kept for the run (no --max-connection-age)".into(),
    };
    out += &format!("connections  opened {}  {age}\n", s.connections_opened);
    out += &format!(
        "requests     answered {}  errors {}  timeouts {}  unsent {}  abandoned {}\n",
        s.answered, s.errors, s.timeouts, s.unsent, s.abandoned
    );
    out += &format!("throughput   {:.2} req/s\n", s.throughput_rps);
    let statuses: Vec<String> = s
        .statuses
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    out += &format!("status       {}\n", statuses.join("  "));
    if !s.latency_ms.is_empty() {
        let order = ["mean", "p50", "p75", "p90", "p99", "p99.9", "max"];
        let head: Vec<String> = order.iter().map(|k| format!("{k:>9}")).collect();
        let vals: Vec<String> = order
            .iter()
            .map(|k| format!("{:>9.1}", s.latency_ms.get(*k).copied().unwrap_or(0.0)))
            .collect();
        out += &format!(
            "latency ms {}\n           {}\n",
            head.join(""),
            vals.join("")
        );
    }
    if let Some(e) = &s.last_error {
        out += &format!("last error   {e}\n");
    }
    for f in &s.failures {
        out += &format!(
            "failed       at {:.1} s ({}): {} in {}{}\n",
            f.after_s,
            utc_hms(f.sent_unix_ms),
            f.kind,
            f.state,
            f.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
    }
    out
}

/// `HH:MM:SS.mmm` UTC of a Unix time in milliseconds (what kubectl's event times compare to).
fn utc_hms(unix_ms: u64) -> String {
    let ms = unix_ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}Z",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use std::time::Duration;

    #[test]
    fn summary_and_table_carry_the_numbers() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for us in [1_000u64, 2_000, 3_000, 500_000] {
            h.record(us).unwrap();
        }
        let r = Results {
            latency_us: h,
            statuses: BTreeMap::from([(200, 3), (500, 1)]),
            errors: 1,
            timeouts: 2,
            unsent: 0,
            abandoned: 0,
            connections_opened: 7,
            elapsed: Duration::from_secs(2),
            last_error: Some("connect: refused".into()),
            failures: vec![super::super::engine::Failure {
                sent_unix_ms: 1_765_000_000_123,
                after_s: 1.5,
                kind: "timeout",
                state: "response, on a connection 0.4 s old".into(),
                error: None,
            }],
        };
        let plan = Plan {
            model: Model::Open { rate: 10.0 },
            duration: Duration::from_secs(2),
            connections: 3,
            timeout: Duration::from_secs(1),
            max_connection_age: Some(Duration::from_millis(500)),
        };
        let s = summarize("http://127.0.0.1:1/", &plan, &r);
        assert_eq!(s.answered, 4);
        assert_eq!(s.throughput_rps, 2.0);
        assert_eq!(s.statuses["500"], 1);
        assert!((s.latency_ms["max"] - 500.0).abs() < 1.0);
        let t = table(&s);
        assert!(t.contains("throughput   2.00 req/s"), "{t}");
        assert!(t.contains("200: 3  500: 1"), "{t}");
        assert!(t.contains("connections  opened 7  max age 0.5 s"), "{t}");
        assert!(
            t.contains("failed       at 1.5 s (05:46:40.123Z): timeout in response, on a connection 0.4 s old\n"),
            "{t}"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["model"], "open");
        assert_eq!(json["timeouts"], 2);
        assert_eq!(json["connections_opened"], 7);
        assert_eq!(json["max_connection_age_s"], 0.5);
        assert_eq!(json["failures"][0]["kind"], "timeout");
        assert_eq!(json["failures"][0]["sent_unix_ms"], 1_765_000_000_123u64);

        let kept = Plan {
            max_connection_age: None,
            ..plan
        };
        let s = summarize("http://127.0.0.1:1/", &kept, &r);
        assert_eq!(
            serde_json::to_value(&s).unwrap()["max_connection_age_s"],
            serde_json::Value::Null
        );
        assert!(
            table(&s).contains("opened 7  kept for the run"),
            "{}",
            table(&s)
        );
    }
}
