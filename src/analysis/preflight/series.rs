//! The vocabulary of the lookup: its windows, the series a check needs and who writes them,
//! the target, and how a lookup is written.

use std::time::Duration;

use crate::api::format_duration;

use super::super::template::{escape_label_value, pods_regex};

/// How far back a series counts as existing (see the module comment).
pub const LOOKBACK: Duration = Duration::from_secs(3600);

/// How long the pods must have been scraped before an absent series counts as never written:
/// a few scrape intervals, time for cAdvisor to list a new container and for
/// prometheus_exporter's Puma collector to send its first stats (every 30 s).
pub const SETTLE: Duration = Duration::from_secs(120);

/// The lookup's windows: `LOOKBACK` and `SETTLE` (shorter only where a test's Prometheus
/// scrapes every second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Windows {
    pub lookback: Duration,
    pub settle: Duration,
}

impl Default for Windows {
    fn default() -> Self {
        Windows {
            lookback: LOOKBACK,
            settle: SETTLE,
        }
    }
}

/// When a series appears, hence what its absence proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appears {
    /// From the exporter's first scrape (gauges; the kubelet's cAdvisor).
    AtScrape,
    /// With the first request the app serves (labelled counters, histograms, custom series).
    WithRequests,
}

/// One series a check reads, for the target's pods.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The metric name as the user knows it (`rails_request_duration_seconds_bucket`).
    pub metric: String,
    /// The lookup sent to Prometheus.
    pub query: String,
    pub appears: Appears,
    /// Who writes it.
    pub writer: String,
}

/// One thing a check needs: any of `any_of` (e.g. the GVL running-seconds counter or
/// cAdvisor's CPU).
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    pub any_of: Vec<Series>,
    /// What to do when none exists.
    pub instead: String,
}

/// Where the experiment looks: the target's namespace, Deployment and app container.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub namespace: String,
    pub deployment: String,
    pub container: String,
    pub windows: Windows,
}

/// `count(last_over_time(SELECTOR[1h]))`.
pub(super) fn lookup(selector: &str, w: &Windows) -> String {
    format!(
        "count(last_over_time({selector}[{}]))",
        format_duration(w.lookback)
    )
}

/// `NAME{namespace="…",pod=~"…"}` (and the container for cAdvisor's series).
pub(super) fn selector(name: &str, t: &Target, container: bool) -> String {
    let esc = |v: &str| escape_label_value(v).unwrap_or_default();
    let mut s = format!(
        r#"{name}{{namespace="{}",pod=~"{}""#,
        esc(&t.namespace),
        esc(&pods_regex(&t.deployment))
    );
    if container {
        s.push_str(&format!(r#",container="{}""#, esc(&t.container)));
    }
    s.push('}');
    s
}
