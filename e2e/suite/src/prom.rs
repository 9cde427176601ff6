//! Prometheus, read with the operator's own client.

use concurrency_operator::prometheus::PrometheusClient;

use crate::Result;

pub struct Prom {
    client: PrometheusClient,
}

impl Prom {
    pub(crate) fn new(url: &str) -> Result<Self> {
        Ok(Prom {
            client: PrometheusClient::new(url, std::time::Duration::from_secs(5))?,
        })
    }

    /// The query's value now (`None`: no data).
    pub async fn value(&self, promql: &str) -> Result<Option<f64>> {
        Ok(self
            .client
            .query_value(promql, jiff::Timestamp::now())
            .await?)
    }

    /// Percent of the requests answered by candidate pods in `ns` over the last `secs`, from
    /// the pods' own request counters (`None` when there were none).
    pub async fn observed_split(&self, ns: &str, secs: u64) -> Result<Option<i64>> {
        let c = self
            .value(&format!(
                "sum(increase(rails_requests_total{{namespace=\"{ns}\",pod=~\".*-candidate-.*\"}}[{secs}s]))"
            ))
            .await?
            .unwrap_or(0.0);
        let t = self
            .value(&format!(
                "sum(increase(rails_requests_total{{namespace=\"{ns}\"}}[{secs}s]))"
            ))
            .await?
            .unwrap_or(0.0);
        Ok((t > 0.0).then(|| (100.0 * c / t).round() as i64))
    }
}

/// Fails unless the observed split (percent, `None` for no requests) is within `tol` points
/// of `expected` (`what` names it in the failure).
pub fn split_within(observed: Option<i64>, expected: i64, tol: i64, what: &str) -> Result {
    match observed {
        Some(o) if (o - expected).abs() <= tol => Ok(()),
        Some(o) => {
            anyhow::bail!("observed split {o}% is not within {tol} points of {what} {expected}%")
        }
        None => {
            anyhow::bail!("no requests observed, so no split to compare with {what} {expected}%")
        }
    }
}
