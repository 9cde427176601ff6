//! The fresh baseline beside the long-running target: both baselines' values recorded from
//! the analysis that measured them, once.

use super::selection_world::*;
use super::*;
use crate::api::{BaselineValues, FreshBaselineStatus};

fn values(target: f64, fresh: f64) -> Vec<BaselineValues> {
    vec![BaselineValues {
        name: "memory".into(),
        target: Some(target * MIB),
        fresh: Some(fresh * MIB),
        reason: None,
    }]
}

#[test]
fn both_baselines_values_are_recorded_from_the_analysis_that_measured_them_once() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    assert_eq!(s.run.status.fresh_baseline, None);
    let measured = |target: f64, secs: i64| FreshBaselineStatus {
        at: Time(at(secs)),
        checks: values(target, 150.0),
    };
    let tick = |s: &mut Sel, b: FreshBaselineStatus| {
        s.run.tick_with(None, |o| o.baselines = Some(b.clone()));
    };
    tick(&mut s, measured(210.0, 60));
    let recorded = s.run.status.fresh_baseline.clone().unwrap();
    assert_eq!(recorded, measured(210.0, 60));
    // The same interval again (a replay after a restart) changes nothing.
    tick(&mut s, measured(999.0, 60));
    assert_eq!(s.run.status.fresh_baseline.as_ref(), Some(&recorded));
    // The next interval replaces it.
    tick(&mut s, measured(220.0, 120));
    assert_eq!(s.run.status.fresh_baseline, Some(measured(220.0, 120)));
}
