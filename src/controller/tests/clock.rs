//! Moving the experiment's clocks back instead of sleeping: the mocked-API tests run on the
//! wall clock, and what waits for a time (a removal held for `scaleDownDelay`) is made due by
//! dating its start an hour earlier.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::{FakeApi, EXP};
use crate::api::ConcurrencyExperiment;

/// The route's last change an hour ago: held removals are due on the next reconcile.
pub fn route_changed_long_ago(fake: &FakeApi) {
    let mut exp: ConcurrencyExperiment = fake.get(EXP).unwrap();
    if let Some(st) = exp.status.as_mut() {
        let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
        st.route_changed_at = Some(Time(hour_ago));
    }
    fake.put(EXP, exp);
}
