//! The fresh baseline beside the long-running target: both baselines' values recorded from
//! the analysis that measured them, once.

use super::selection_world::*;
use super::*;
use crate::api::BaselineValues;

fn values(target: f64, fresh: f64) -> Vec<BaselineValues> {
    vec![BaselineValues {
        name: "memory".into(),
        target: Some(target * MIB),
        fresh: Some(fresh * MIB),
        reason: None,
    }]
}

#[test]
fn both_baselines_values_are_recorded_from_the_selections_analysis_and_not_replayed() {
    let mut s = Sel::new(selection_spec(""), 6);
    s.tick(None);
    s.tick(None);
    assert_eq!(s.run.status.fresh_baseline, None);
    s.run.now += 60;
    let analysis = |target: f64, now: i64| SelectionAnalysis {
        at: at(now),
        fresh_baseline_objective: Some(150.0 * MIB),
        candidates: Vec::new(),
        target_values: values(target, 150.0),
    };
    let now = s.run.now;
    s.tick(Some(analysis(210.0, now)));
    let recorded = s.run.status.fresh_baseline.clone().unwrap();
    assert_eq!(recorded.at, Time(at(now)));
    assert_eq!(recorded.checks, values(210.0, 150.0));
    // The same interval again (a replay after a restart) changes nothing.
    s.tick(Some(analysis(999.0, now)));
    assert_eq!(s.run.status.fresh_baseline.as_ref(), Some(&recorded));
    // The next interval replaces it.
    s.run.now += 60;
    let later = s.run.now;
    s.tick(Some(analysis(220.0, later)));
    assert_eq!(
        s.run
            .status
            .fresh_baseline
            .as_ref()
            .map(|f| f.checks.clone()),
        Some(values(220.0, 150.0))
    );
}
