//! The pre-flight series lookup's I/O (`plan::preflight_due` says when): where the target's
//! pods are, and the Prometheus client. The decision is `analysis::preflight` (what to look up
//! and what the answers mean) and the stage machine's (`Invalid`, wait, or go on).

use jiff::Timestamp;
use kube::ResourceExt;

use super::context::Context;
use super::observe::fetch::Fetched;
use crate::analysis::preflight::{self, Target};
use crate::analysis::queue_header::CoarseClock;
use crate::analysis::{self, Preflight};
use crate::api::ConcurrencyExperiment;
use crate::workload;

/// What the pre-flight found: the lookup, and with a lookup that found nothing missing the
/// target's request rate (what `reach` warns on) and whether its queue times come from a
/// one-second clock.
pub struct Looked {
    pub found: Preflight,
    pub rate: Option<f64>,
    pub queue_clock: Option<CoarseClock>,
}

/// Looks up every check's series for the target's pods and, when none is missing, measures the
/// target's request rate and queue times; `None` without a target or app container to look for
/// (the stage machine waits for the target, and reports the container).
pub async fn run(
    ctx: &Context,
    exp: &ConcurrencyExperiment,
    fetched: &Fetched,
    now: Timestamp,
) -> Option<Looked> {
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
            return Some(Looked {
                found: Preflight::Unavailable(format!("Prometheus {url}: {e}")),
                rate: None,
                queue_clock: None,
            })
        }
    };
    let found = analysis::preflight(&client, &exp.spec.analysis, &target, now).await;
    let (rate, queue_clock) = match found {
        Preflight::Passed | Preflight::Unchecked(_) => futures::join!(
            preflight::target_rate(&client, &exp.spec.analysis, &target, now),
            preflight::queue_clock(&client, &exp.spec.analysis, &target, now)
        ),
        Preflight::Missing(_) | Preflight::Unavailable(_) => (None, None),
    };
    Some(Looked {
        found,
        rate,
        queue_clock,
    })
}
