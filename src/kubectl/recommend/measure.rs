//! What `recommend` measures, with the operator's query templates, and how each figure's
//! source is chosen.

use std::time::Duration;

use jiff::Timestamp;

use crate::analysis::{
    busiest_pod_rate_template, choose_io_share, choose_times, container_cpu_per_request_template,
    cpu_per_request_template, io_per_request_template, io_share_template, pods_regex, render,
    total_rate_template, wall_per_request_template, ChosenTimes, GvlTimes, StandardTimes,
    TemplateVars,
};
use crate::api::{CapacitySource, MetricNames};
use crate::kubectl::PluginError;
use crate::prometheus::PrometheusClient;

use super::Target;

/// What is measured, in the order it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    IoShare,
    CpuPerRequest,
    IoPerRequest,
    BusiestPodRate,
    /// Standard metrics: the container's CPU seconds (cAdvisor) per request.
    ContainerCpuPerRequest,
    /// Standard metrics: the request-duration `_sum / _count`.
    WallPerRequest,
    /// Requests per second over all the pods (`init`: whether the stages reach the data the
    /// checks need).
    TotalRate,
}

impl Quantity {
    /// What `recommend` sizes with (`init` also asks `TotalRate`).
    pub const ALL: [Quantity; 6] = [
        Quantity::IoShare,
        Quantity::CpuPerRequest,
        Quantity::IoPerRequest,
        Quantity::BusiestPodRate,
        Quantity::ContainerCpuPerRequest,
        Quantity::WallPerRequest,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Quantity::IoShare => "I/O share",
            Quantity::CpuPerRequest => "CPU per request",
            Quantity::IoPerRequest => "I/O per request",
            Quantity::BusiestPodRate => "busiest pod rate",
            Quantity::ContainerCpuPerRequest => "container CPU per request",
            Quantity::WallPerRequest => "wall time per request",
            Quantity::TotalRate => "request rate",
        }
    }
}

/// The queries of `Quantity::ALL` for the Deployment's pods over `window`, rendered as sent.
pub fn queries(
    target: &Target,
    names: &MetricNames,
    window: Duration,
) -> Result<Vec<(Quantity, String)>, PluginError> {
    queries_of(target, names, window, &Quantity::ALL)
}

/// The queries of `which` for the Deployment's pods over `window`, rendered as sent.
pub fn queries_of(
    target: &Target,
    names: &MetricNames,
    window: Duration,
    which: &[Quantity],
) -> Result<Vec<(Quantity, String)>, PluginError> {
    let vars = TemplateVars {
        namespace: target.namespace.clone(),
        pods: pods_regex(&target.deployment),
        interval: window,
        window,
        container: target.container.clone(),
    };
    let usage = |e: &dyn std::fmt::Display| PluginError::Usage(e.to_string());
    which
        .iter()
        .map(|&q| {
            let template = match q {
                Quantity::IoShare => io_share_template(names),
                Quantity::CpuPerRequest => cpu_per_request_template(names),
                Quantity::IoPerRequest => io_per_request_template(names),
                Quantity::BusiestPodRate => busiest_pod_rate_template(names),
                Quantity::ContainerCpuPerRequest => container_cpu_per_request_template(names),
                Quantity::WallPerRequest => wall_per_request_template(names),
                Quantity::TotalRate => total_rate_template(names),
            }
            .map_err(|e| usage(&e))?;
            let promql = render(q.name(), &template, &vars).map_err(|e| usage(&e))?;
            Ok((q, promql))
        })
        .collect()
}

/// The measured values; `None` where the query returned nothing or NaN (0/0: no requests).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// From the GVL counters.
    pub io_share: Option<f64>,
    pub cpu: Option<f64>,
    pub io: Option<f64>,
    pub busiest_pod_rate: Option<f64>,
    /// From standard metrics.
    pub container_cpu: Option<f64>,
    pub wall: Option<f64>,
    pub total_rate: Option<f64>,
}

impl Measurement {
    pub fn get(&self, q: Quantity) -> Option<f64> {
        match q {
            Quantity::IoShare => self.io_share,
            Quantity::CpuPerRequest => self.cpu,
            Quantity::IoPerRequest => self.io,
            Quantity::BusiestPodRate => self.busiest_pod_rate,
            Quantity::ContainerCpuPerRequest => self.container_cpu,
            Quantity::WallPerRequest => self.wall,
            Quantity::TotalRate => self.total_rate,
        }
    }

    fn set(&mut self, q: Quantity, v: Option<f64>) {
        let slot = match q {
            Quantity::IoShare => &mut self.io_share,
            Quantity::CpuPerRequest => &mut self.cpu,
            Quantity::IoPerRequest => &mut self.io,
            Quantity::BusiestPodRate => &mut self.busiest_pod_rate,
            Quantity::ContainerCpuPerRequest => &mut self.container_cpu,
            Quantity::WallPerRequest => &mut self.wall,
            Quantity::TotalRate => &mut self.total_rate,
        };
        *slot = v.filter(|v| v.is_finite());
    }

    fn standard(&self) -> StandardTimes {
        StandardTimes {
            cpu: self.container_cpu,
            wall: self.wall,
        }
    }

    /// The I/O share the operator would use, and its source.
    pub fn io_share_chosen(&self) -> Option<(f64, CapacitySource)> {
        choose_io_share(self.io_share, Some(self.standard()))
    }

    /// The CPU and I/O seconds per request the operator would use, and their source.
    pub fn times(&self) -> ChosenTimes {
        let exact = GvlTimes {
            cpu: self.cpu,
            io: self.io,
        };
        choose_times(exact, Some(self.standard()))
    }

    /// The quantities whose query returned nothing where the figure they give is missing from
    /// both sources (a query the other source made up for is not missing).
    pub fn missing(&self) -> Vec<Quantity> {
        use Quantity::*;
        let times = self.times();
        let figures: [(bool, &[Quantity]); 4] = [
            (
                self.io_share_chosen().is_some(),
                &[IoShare, ContainerCpuPerRequest, WallPerRequest],
            ),
            (
                times.cpu.is_some(),
                &[CpuPerRequest, ContainerCpuPerRequest],
            ),
            (
                times.io.is_some(),
                &[IoPerRequest, ContainerCpuPerRequest, WallPerRequest],
            ),
            (self.busiest_pod_rate.is_some(), &[BusiestPodRate]),
        ];
        Quantity::ALL
            .into_iter()
            .filter(|q| self.get(*q).is_none())
            .filter(|q| figures.iter().any(|(has, from)| !has && from.contains(q)))
            .collect()
    }
}

/// Runs the queries; a Prometheus error (unreachable, rejected query) ends the measurement.
pub async fn measure(
    client: &PrometheusClient,
    queries: &[(Quantity, String)],
    at: Timestamp,
) -> Result<Measurement, PluginError> {
    let answers =
        futures::future::join_all(queries.iter().map(|(_, q)| client.query_value(q, at))).await;
    let mut m = Measurement::default();
    for ((q, _), answer) in queries.iter().zip(answers) {
        m.set(*q, answer?);
    }
    Ok(m)
}
