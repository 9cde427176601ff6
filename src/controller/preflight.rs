//! The pre-flight series lookup's I/O (`plan::preflight_due` says when): where the target's
//! pods are, and the Prometheus client. The decision is `analysis::preflight` (what to look up
//! and what the answers mean) and the stage machine's (`Invalid`, wait, or go on).

use jiff::Timestamp;
use kube::ResourceExt;

use super::context::Context;
use super::observe::fetch::Fetched;
use crate::analysis::preflight::{self, Target};
use crate::analysis::{self, Preflight};
use crate::api::ConcurrencyExperiment;
use crate::workload;

/// Looks up every check's series for the target's pods and, when none is missing, measures the
/// target's request rate (what `reach` warns on); `None` without a target or app container to
/// look for (the stage machine waits for the target, and reports the container).
pub async fn run(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    now: Timestamp,
) -> Option<(Preflight, Option<f64>)> {
    let target = fetched.target.as_ref()?;
    let container = workload::app_container(target, exp.spec.container.as_deref()).ok()?;
    let target = Target {
        namespace: exp.namespace()?,
        deployment: target.name_any(),
        container: container.name.clone(),
        windows: Default::default(),
    };
    let (client, url) =
        ctx.prometheus
            .for_experiment(exp, ctx.settings.prometheus_timeout, &ctx.metrics);
    let client = match client {
        Ok(client) => client,
        Err(e) => {
            return Some((
                Preflight::Unavailable(format!("Prometheus {url}: {e}")),
                None,
            ))
        }
    };
    let found = analysis::preflight(&client, &exp.spec.analysis, &target, now).await;
    let rate = match found {
        Preflight::Passed | Preflight::Unchecked(_) => {
            preflight::target_rate(&client, &exp.spec.analysis, &target, now).await
        }
        Preflight::Missing(_) | Preflight::Unavailable(_) => None,
    };
    Some((found, rate))
}
